"""The validation seam: every measuring path asks its runner with one RunRequest, and a version
of a script staged in a workspace runs as the bytes it was staged with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuperf_rewrite.validate.run import profiling
from gpuperf_rewrite.validate.judge.abtest import ABConfig, measure, run_ab
from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply
from gpuperf_rewrite.validate.run.runs import RunRequest, ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace
from tests.helpers.abfakes import FakeRunner, fake_rewriter, fake_script

CFG = dict(steps=4, warmup=1, timeout=30.0, bootstrap_resamples=200)


class Recording(FakeRunner):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Any] = []

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        self.requests.append(request)
        return super().__call__(request)


def _measured(requests: list[Any], cfg: ABConfig) -> None:
    assert requests and all(isinstance(r, RunRequest) for r in requests)
    assert {(r.steps, r.warmup, r.timeout) for r in requests} == {(cfg.steps, cfg.warmup, cfg.timeout)}


def test_ab_and_measure_ask_with_one_request_per_run(tmp_path: Path) -> None:
    a = fake_script(tmp_path / "a.py", speed=100)
    b = fake_script(tmp_path / "b.py", speed=150)
    cfg = ABConfig(runs=4, max_runs=4, seed=7, **CFG)
    run = Recording()
    run_ab(a, b, ["--x", "1"], config=cfg, runner=run)
    _measured(run.requests, cfg)
    assert {r.args for r in run.requests} == {("--x", "1")}
    pairs = len(run.requests) // 2  # pair k: seed + k on both sides
    assert sorted(r.seed for r in run.requests) == sorted(2 * [7 + k for k in range(pairs)])
    run = Recording()
    measure(a, ["--y"], config=cfg, runner=run)
    _measured(run.requests, cfg)
    assert [r.seed for r in run.requests] == [7, 8, 9, 10] and {r.script for r in run.requests} == {str(a)}


def test_apply_profiles_and_measures_with_requests_run_in_mirrors(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = fake_script(tmp_path / "train.py", speed=100, noise=0.01)
    cfg = ABConfig(runs=4, max_runs=4, **CFG)
    run = Recording()
    rc = run_apply(str(script), config=cfg, options=ApplyOptions(no_commit=True), runner=run,
                   rewriter=fake_rewriter(("X1",)), echo=lambda *a, **k: None)
    assert rc in (0, 1)
    _measured(run.requests, cfg)  # the plan's profile run too
    assert all(r.cwd and Path(r.script).is_relative_to(Path(r.cwd)) for r in run.requests)  # in a mirror
    assert all(r.env is not None for r in run.requests)


def test_a_staged_version_runs_as_its_bytes_not_as_the_file_at_its_path(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("# fake: speed=100\n")
    seen: list[str] = []

    def run(request: RunRequest) -> dict[str, Any]:
        seen.append(Path(request.script).read_text())
        return {"status": "step_limit"}

    with Workspace(cwd=tmp_path) as ws:
        path = ws.add(ScriptVersion(script, b"# fake: speed=150\n"))
        path.write_text("# something else\n")  # the path names the version; its bytes are held
        ws.runner(run)(run_request(path))
    assert seen == ["# fake: speed=150\n"]
    assert script.read_text() == "# fake: speed=100\n"


def test_the_profile_runner_passes_every_field_of_the_request(monkeypatch) -> None:
    got: dict[str, Any] = {}

    def fake_run_profile(script: str, script_args: Any = (), **kw: Any) -> dict[str, Any]:
        got.update(script=script, args=script_args, **kw)
        return {"status": "step_limit"}

    monkeypatch.setattr(profiling, "run_profile", fake_run_profile)
    req = run_request("t.py", ["--a", 1], steps=3, warmup=2, timeout=9.0, seed=4, cwd="/w", env={"K": "v"},
                      python="py", trace_dir="/t", launcher="torchrun", nproc_per_node=2, module="pkg.t",
                      launcher_args=("--x",))
    assert profiling.profile_runner(req) == {"status": "step_limit"}
    assert got == {"script": "t.py", "args": ("--a", "1"), "steps": 3, "warmup": 2, "timeout": 9.0, "seed": 4,
                   "cwd": "/w", "env": {"K": "v"}, "python": "py", "trace_dir": "/t", "launcher": "torchrun",
                   "nproc_per_node": 2, "module": "pkg.t", "launcher_args": ("--x",)}
