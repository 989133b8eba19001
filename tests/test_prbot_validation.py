"""The PR bot's A/B validator (``pr-bot --validate``) with a fake A/B module in place of
gpuperf_rewrite.validate.abtest: each fix measured alone beside the script."""

from __future__ import annotations

import math
import random
import statistics
import sys
import types
from pathlib import Path

import pytest

from gpuperf_rewrite.integrations.github.report import Candidate
from gpuperf_rewrite.integrations.github.validator import ab_validator
from gpuperf_rewrite.lint.engine import RuleSet
from gpuperf_rewrite.lint.patches import finding_patches
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.validate.abtest import ABConfig
from helpers.prbot import SLOW_TRAIN, make_repo


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    return make_repo(tmp_path, monkeypatch)


class FakeAB:
    """Stands in for ``run_ab``: each side's throughput is ``config.runs`` draws of
    100 * effect * (1 + noise * N(0, 1)), effect 1.0 for a fix that does nothing; the verdict is
    ``faster`` when a one-sided z-test of B over A has p < ``config.alpha``. The noise is known,
    so under no effect p is exactly uniform and a single A/B says ``faster`` with probability
    alpha, as a real A/B at its nominal level at best does."""

    def __init__(self, effects: dict[str, float] | None = None, noise: float = 0.10, seed: int = 0) -> None:
        self.effects = effects or {}  # text only B contains -> true speedup of that fix
        self.noise = noise
        self.rng = random.Random(seed)
        self.calls: list[dict] = []

    def __call__(self, a, b, args, *, config, cwd, source_a, source_b, **kw):
        effect = next((e for text, e in self.effects.items() if text in source_b), 1.0)
        draw = [100 * (1 + self.noise * self.rng.gauss(0, 1)) for _ in range(config.runs)]
        side_b = [100 * effect * (1 + self.noise * self.rng.gauss(0, 1)) for _ in range(config.runs)]
        diff = statistics.fmean(side_b) - statistics.fmean(draw)
        p = 1 - statistics.NormalDist().cdf(diff / (100 * self.noise * math.sqrt(2 / config.runs)))
        self.calls.append({"alpha": config.alpha, "p": p, "a": Path(a), "b": Path(b), "args": list(args),
                           "source_a": Path(a).read_text(), "source_b": Path(b).read_text()})
        stats = types.SimpleNamespace(speedup=statistics.fmean(side_b) / statistics.fmean(draw), ci95=(0.9, 1.1))
        verdict = "faster" if p < config.alpha else "no_difference"
        return types.SimpleNamespace(verdict=verdict, reason=f"p={p:.3g}", stats=stats)


def _install(monkeypatch, run_ab) -> None:
    """Replace the A/B module the validator imports by one with the real ABConfig and ``run_ab``."""
    fake = types.ModuleType("gpuperf_rewrite.validate.abtest")
    fake.ABConfig = ABConfig
    fake.run_ab = run_ab
    monkeypatch.setitem(sys.modules, "gpuperf_rewrite.validate.abtest", fake)


def _candidates(text: str, path: str = "train.py", rules: tuple[str, ...] | None = None) -> list[Candidate]:
    ruleset = RuleSet(rules or tuple(all_rules()))
    return [Candidate(path, text, p) for p in finding_patches(text.encode(), path, ruleset, "unsafe")]


def test_ab_validator_runs_each_fix_beside_the_script(repo, monkeypatch):
    fake = FakeAB(effects={"pin_memory": 1.5})
    _install(monkeypatch, fake)
    (cand,) = _candidates(SLOW_TRAIN, rules=("GP202",))
    validate = ab_validator("train.py", ["--steps", "5"], repo)
    (m,) = validate([cand])
    assert m is not None and m.passed and m.detail.startswith("faster: p=")
    (call,) = fake.calls
    assert call["a"].parent == repo and call["source_a"] == SLOW_TRAIN
    assert call["source_b"] == cand.patch.apply(SLOW_TRAIN) and call["args"] == ["--steps", "5"]
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gpuperf.yaml", "train.py"]  # temp copies removed
    # A fix in another file cannot be measured by running the script: not tested, no share of alpha.
    (other,) = validate([Candidate("lib/model.py", SLOW_TRAIN, cand.patch)])
    assert other is not None and not other.passed and "not in the validated script" in other.detail
    assert len(fake.calls) == 1


def test_a_crashed_measurement_rejects_the_fix(repo, monkeypatch):
    def crash(*a, **k):
        raise RuntimeError("CUDA error: out of memory")

    _install(monkeypatch, crash)
    (m,) = ab_validator("train.py", [], repo)(_candidates(SLOW_TRAIN, rules=("GP202",)))
    assert m is not None and not m.passed and "RuntimeError: CUDA error: out of memory" in m.detail
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gpuperf.yaml", "train.py"]
