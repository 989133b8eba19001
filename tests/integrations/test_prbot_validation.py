"""The PR bot's A/B validator (``pr-bot --validate``) with a fake A/B module in place of
gpuperf_rewrite.validate.judge.abtest: each fix measured alone in a scratch mirror of the checkout, and the review's
false-proposal rate held at alpha by splitting it over the fixes validated (Bonferroni)."""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.integrations.github import bot as prbot
from gpuperf_rewrite.integrations.github.report import Candidate
from gpuperf_rewrite.integrations.github.validator import ab_validator, per_test_alpha
from gpuperf_rewrite.lint.engine import RuleSet
from gpuperf_rewrite.lint.patches import finding_patches
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.validate.judge.abtest import ABConfig
from gpuperf_rewrite.validate.run.runs import run_request
from tests.helpers.prbot import SLOW_TRAIN, commit, make_repo


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    return make_repo(tmp_path, monkeypatch)


class FakeAB:
    """Stands in for ``run_ab``: each side's throughput is ``config.runs`` draws of
    100 * effect * (1 + noise * N(0, 1)), effect 1.0 for a fix that does nothing; the verdict is
    ``faster`` when a one-sided z-test of B over A has p < ``config.alpha``. The noise is known,
    so under no effect p is exactly uniform and a single A/B says ``faster`` with probability
    alpha, as a real A/B at its nominal level at best does."""

    def __init__(self, effects: dict[str, float] | None = None, noise: float = 0.10, seed: int = 0,
                 run_sides: bool = False) -> None:
        self.run_sides = run_sides  # also run each side once through the workspace's runner
        self.effects = effects or {}  # text only B contains -> true speedup of that fix
        self.noise = noise
        self.rng = random.Random(seed)
        self.calls: list[dict] = []

    def __call__(self, a, b, args, *, config, runner, source_a, source_b, **kw):
        for side in (a, b) if self.run_sides else ():
            runner(run_request(side, args))
        effect = next((e for text, e in self.effects.items() if text in source_b), 1.0)
        draw = [100 * (1 + self.noise * self.rng.gauss(0, 1)) for _ in range(config.runs)]
        side_b = [100 * effect * (1 + self.noise * self.rng.gauss(0, 1)) for _ in range(config.runs)]
        diff = statistics.fmean(side_b) - statistics.fmean(draw)
        p = 1 - statistics.NormalDist().cdf(diff / (100 * self.noise * math.sqrt(2 / config.runs)))
        self.calls.append({"alpha": config.alpha, "p": p, "a": Path(a), "b": Path(b), "args": list(args),
                           "source_a": Path(a).read_text(), "source_b": Path(b).read_text()})
        stats = types.SimpleNamespace(speedup=statistics.fmean(side_b) / statistics.fmean(draw), ci95=(0.9, 1.1))
        verdict = "faster" if p < config.alpha else "no_difference"

        def to_json() -> dict:  # the keys of ABResult.to_json an HTML page of the A/B draws
            runs = {k: [{"side": k.upper(), "index": i, "status": "completed", "throughput": v}
                        for i, v in enumerate(vals)] for k, vals in (("a", draw), ("b", side_b))}
            return {"verdict": verdict, "reason": f"p={p:.3g}", "speedup": stats.speedup, "ci95": list(stats.ci95),
                    "p_value": p, "unit": "samples/s", "loss_check": {"status": "passed"},
                    "runs": {"a": config.runs, "b": config.runs, "stopped": "max_runs"},
                    "a": {"median": statistics.median(draw), "samples": draw, "runs": runs["a"]},
                    "b": {"median": statistics.median(side_b), "samples": side_b, "runs": runs["b"]}}

        return types.SimpleNamespace(verdict=verdict, reason=f"p={p:.3g}", stats=stats, to_json=to_json)


SEEN: list[tuple[str, bool, bool]] = []


def _record_run(request):
    """What a run sees: its own name, its siblings, its cwd; it writes a checkpoint there."""
    script = Path(request.script)
    SEEN.append((script.name, (script.parent / ".gpuperf.yaml").is_file(), Path(request.cwd) == script.parent))
    (script.parent / "checkpoint.pt").write_text("written by the run")
    return {}


class _FlatWorkspace:
    """A stand-in for validate.run.workspace.Workspace that writes both sides into one temp dir."""

    def __init__(self, **kw) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="gpuperf-test-"))
        self.n = 0

    def __enter__(self) -> "_FlatWorkspace":
        return self

    def __exit__(self, *exc) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def add(self, version):
        self.n += 1
        path = self.dir / f"{self.n}_{version.original.name}"
        path.write_bytes(version.source)
        return path

    def runner(self, base):
        return base


def _install(monkeypatch, run_ab) -> None:
    """Replace the A/B module the validator imports by one with the real ABConfig and ``run_ab``."""
    from gpuperf_rewrite.validate.judge import abtest as real

    fake = types.ModuleType("gpuperf_rewrite.validate.judge.abtest")
    fake.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})  # ABResult... for --html
    fake.ABConfig = ABConfig
    fake.run_ab = run_ab
    fake.default_runner = lambda: _record_run
    monkeypatch.setitem(sys.modules, "gpuperf_rewrite.validate.judge.abtest", fake)


def _candidates(text: str, path: str = "train.py", rules: tuple[str, ...] | None = None) -> list[Candidate]:
    ruleset = RuleSet(rules or tuple(all_rules()))
    return [Candidate(path, text, p) for p in finding_patches(text.encode(), path, ruleset, "unsafe")]


def test_ab_validator_runs_each_fix_in_a_mirror_of_the_checkout(repo, monkeypatch):
    SEEN.clear()
    fake = FakeAB(effects={"pin_memory": 1.5}, run_sides=True)
    _install(monkeypatch, fake)
    (cand,) = _candidates(SLOW_TRAIN, rules=("GP202",))
    validate = ab_validator("train.py", ["--steps", "5"], repo)
    (m,) = validate([cand])
    assert m is not None and m.passed and m.alpha == 0.05 and m.detail.startswith("faster: p=")
    (call,) = fake.calls
    assert call["a"].name == "train.py" and call["source_a"] == SLOW_TRAIN
    assert SEEN == [("train.py", True, True)] * 2
    assert call["source_b"] == cand.patch.apply(SLOW_TRAIN) and call["args"] == ["--steps", "5"]
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gpuperf.yaml", "train.py"]  # nothing written
    # A fix in another file cannot be measured by running the script: not tested, no share of alpha.
    (other,) = validate([Candidate("lib/model.py", SLOW_TRAIN, cand.patch)])
    assert other is not None and not other.passed and "not in the validated script" in other.detail
    assert other.alpha is None and len(fake.calls) == 1


def test_a_crashed_measurement_rejects_the_fix(repo, monkeypatch):
    def crash(*a, **k):
        raise RuntimeError("CUDA error: out of memory")

    _install(monkeypatch, crash)
    (m,) = ab_validator("train.py", [], repo)(_candidates(SLOW_TRAIN, rules=("GP202",)))
    assert m is not None and not m.passed and "RuntimeError: CUDA error: out of memory" in m.detail
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gpuperf.yaml", "train.py"]


def test_alpha_is_split_over_the_fixes_validated_in_one_review(repo, monkeypatch):
    """One review, three fixes in the validated script and one in another file: each A/B runs at
    alpha/3, the true 1.3x fix still passes, and the summary states the family-wise bound."""
    fake = FakeAB(effects={"loss.detach()": 1.3})  # the GP101 fix is truly faster, the others do nothing
    _install(monkeypatch, fake)
    commit(repo, {"data.py": "from torch.utils.data import DataLoader\nloader = DataLoader([float(i) for i in range(8)])\n"
                              "if __name__ == '__main__':\n    print(list(loader))\n"},
           "another file with a fixable finding")
    report, plan, _ = prbot.run(repo, {}, base="main", dry_run=True, validator=ab_validator("train.py", [], repo),
                                echo=lambda s: None, log=lambda s: None)
    assert [c["alpha"] for c in fake.calls] == [pytest.approx(0.05 / 3)] * 3
    status = {(r.diag.path, r.diag.code): r.status for r in report.rows}
    assert status[("train.py", "GP101")] == "proposed"
    elsewhere = [r for r in report.rows if r.diag.path == "data.py"]
    assert elsewhere and all(r.status == "rejected" and r.measurement and r.measurement.alpha is None
                             for r in elsewhere)  # cannot be measured by running train.py
    assert "3 A/B tests in this review, each at significance level 0.0167 (Bonferroni)" in plan.body
    assert "is at most 0.05." in plan.body


def test_cli_alpha_sets_the_family_wise_level(repo, monkeypatch):
    fake = FakeAB()
    _install(monkeypatch, fake)
    res = CliRunner().invoke(cli, ["pr-bot", "--base", "main", "--dry-run", "--validate", "train.py",
                                   "--alpha", "0.1"])
    assert res.exit_code == 0, res.output
    assert [c["alpha"] for c in fake.calls] == [pytest.approx(0.1 / 3)] * 3
    assert "each A/B at alpha=0.0333 (Bonferroni)" in res.stderr
    assert "at most 0.1." in json.loads(res.stdout)["body"]


def test_review_draws_the_speedups_and_links_the_html_pages(repo, monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    from tests.helpers.htmlpage import Dom

    fake = FakeAB(effects={"num_workers": 1.5}, noise=0.01)
    _install(monkeypatch, fake)
    env = {"GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "77",
           "GPUPERF_REPORT_ARTIFACT": "gpuperf-report"}
    res = CliRunner().invoke(cli, ["pr-bot", "--base", "main", "--dry-run", "--validate", "train.py", "--html",
                                   str(tmp_path / "pages")], env=env)
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)["body"]
    chart = body[body.index("```mermaid"):]
    assert "xychart-beta" in chart and chart.count('"GP') == len(fake.calls) and "line [1, 1, 1]" in chart
    assert "`gpuperf-report` artifact of [this workflow run](https://github.example/o/r/actions/runs/77)" in body
    pages = sorted((tmp_path / "pages").glob("*.html"))
    assert len(pages) == len(fake.calls)
    dom = Dom(pages[0].read_text())
    assert dom.points("throughput-a") == dom.points("throughput-b") == ABConfig().runs  # one point per run
    res = CliRunner().invoke(cli, ["pr-bot", "--base", "main", "--dry-run", "--html", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--html needs --validate" in res.output


def test_cli_alpha_without_validate_is_a_usage_error(repo):
    res = CliRunner().invoke(cli, ["pr-bot", "--base", "main", "--dry-run", "--alpha", "0.1"])
    assert res.exit_code == 2 and "--alpha needs --validate" in res.output


def test_per_test_alpha():
    assert per_test_alpha(0.05, 1) == 0.05
    assert per_test_alpha(0.05, 5) == pytest.approx(0.01)
    assert per_test_alpha(0.05, 0) == 0.05


def test_no_op_fixes_are_proposed_in_at_most_alpha_of_reviews(repo, monkeypatch):
    """Simulated reviews of a script with k fixes that all do nothing, at 10% run-to-run noise:
    the share of reviews that propose any fix stays within alpha (up to simulation error), while
    the same A/Bs at the full alpha each (the bot before the split) would propose something in
    about 1 - 0.95^k of them."""
    fake = FakeAB(noise=0.10, seed=12)
    _install(monkeypatch, fake)
    # Thousands of A/Bs: keep the sides in one directory instead of a scratch mirror per A/B
    # (the mirror is tested above; here only the decisions matter).
    monkeypatch.setattr("gpuperf_rewrite.validate.run.workspace.Workspace", _FlatWorkspace)
    candidates = _candidates(SLOW_TRAIN)
    k = len(candidates)
    assert k >= 5
    validate = ab_validator("train.py", [], repo)
    reviews = 300  # enough: the bound below is 0.088 and the unsplit A/Bs reach about 0.23
    proposed_any = uncontrolled_any = 0
    for _ in range(reviews):
        first = len(fake.calls)
        answers = validate(candidates)
        proposed_any += any(m is not None and m.passed for m in answers)
        uncontrolled_any += any(c["p"] < 0.05 for c in fake.calls[first:])
    # 3 standard errors above alpha: a correct split fails this about once in a thousand seeds.
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / reviews)
    assert proposed_any / reviews <= bound, (proposed_any, reviews)
    assert {c["alpha"] for c in fake.calls} == {0.05 / k}
    # The check has teeth: without the split the same draws clear it by far.
    assert uncontrolled_any / reviews > 2 * bound, (uncontrolled_any, reviews)
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gpuperf.yaml", "train.py"]
