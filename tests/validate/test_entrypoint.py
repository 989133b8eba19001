"""Module entry points (`-m pkg.train`, as `python -m` runs it) in every command that runs a
script: resolution, the scratch mirror, --apply/ab/baseline/regress (fake runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.record.baseline import check_regression, record_baseline  # noqa: E402
from gpuperf_rewrite.validate.run.entrypoint import EntryPointError, resolve_module  # noqa: E402
from gpuperf_rewrite.validate.run.runs import RunRequest, ScriptVersion, run_request  # noqa: E402
from gpuperf_rewrite.validate.run.workspace import Workspace  # noqa: E402
from gpuperf_rewrite.validate.apply import run_apply  # noqa: E402
from tests.helpers.abfakes import FakeRunner, fake_rewriter, git_repo  # noqa: E402

TRAIN = "# fake: speed=100 noise=0.01 fast_if=num_workers=min\nfrom .model import SCALE\nprint('train')\n"
PKG = {"pkg/__init__.py": "", "pkg/model.py": "SCALE = 2\n", "pkg/train.py": TRAIN,
       "pkg/fast.py": TRAIN.replace("speed=100", "speed=150")}
OPTS = ["--runs", "6", "--steps", "5", "--warmup", "1"]
CFG = abtest.ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)


class ModuleRunner(FakeRunner):
    """A fake run that records how it was started and what the mirror around the copy held."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.seen: list[dict[str, Any]] = []

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        copy = Path(request.script)
        self.seen.append({"module": request.module, "copy": copy, "args": list(request.args), "cwd": request.cwd,
                          "package": (copy.parent / "__init__.py").is_file() and (copy.parent / "model.py").is_file()})
        return super().__call__(request)


def test_resolve_module_finds_the_file_python_m_runs(tmp_path, monkeypatch) -> None:
    for name, text in {**PKG, "pkg/__main__.py": "", "src/lib2/job.py": "", "ns/run.py": ""}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {"PYTHONPATH": "src"}
    ep = resolve_module("pkg.train", tmp_path, env)
    assert ep.path == tmp_path / "pkg" / "train.py" and ep.root == tmp_path and ep.label == "-m pkg.train"
    assert resolve_module("pkg", tmp_path, env).path == tmp_path / "pkg" / "__main__.py"
    assert resolve_module("ns.run", tmp_path, env).path == tmp_path / "ns" / "run.py"  # namespace package
    src = resolve_module("lib2.job", tmp_path, env)
    assert src.path == tmp_path / "src" / "lib2" / "job.py" and src.root == tmp_path / "src"
    monkeypatch.chdir(tmp_path)
    assert resolve_module("pkg.train").path == tmp_path / "pkg" / "train.py"  # the current directory
    for bad in ("pkg.nope", "lib2.job2", "pkg/train.py", "pkg..train", ""):
        with pytest.raises(EntryPointError):
            resolve_module(bad, tmp_path, env)


def test_apply_with_a_module_runs_every_run_as_the_module_inside_its_package(tmp_path) -> None:
    repo = git_repo(tmp_path, PKG)
    runner = ModuleRunner(3)
    out: list[str] = []
    rc = run_apply(str(tmp_path / "pkg" / "train.py"), runner=runner, rewriter=fake_rewriter(("X1",)),
                   config=CFG, echo=lambda m="", **_: out.append(str(m)), module=("pkg.train", tmp_path))
    assert rc == 0, "\n".join(out)
    assert runner.seen and all(s["module"] == "pkg.train" for s in runner.seen)
    assert all(s["package"] and s["copy"].name == "train.py" for s in runner.seen)  # siblings mirrored
    assert all(not str(s["copy"]).startswith(str(tmp_path)) for s in runner.seen)  # scratch copies only
    assert "speed=150" in (tmp_path / "pkg" / "train.py").read_text()
    assert list(repo.head.commit.stats.files) == ["pkg/train.py"]


def test_cli_apply_m_lints_and_rewrites_the_modules_file(tmp_path, monkeypatch) -> None:
    """`gpuperf-rewrite -m pkg.train --apply`: real rules (GP201) on the module's file, fake runs."""
    from tests.validate.test_apply import LOADER_SCRIPT

    repo = git_repo(tmp_path, {**PKG, "pkg/train.py": LOADER_SCRIPT + "from .model import SCALE\n"})
    monkeypatch.chdir(tmp_path)
    runner = ModuleRunner(3)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    r = CliRunner().invoke(cli, ["-m", "pkg.train", "--apply", "--select", "GP201", *OPTS, "--json",
                                 "--", "--epochs", "1"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "committed" and doc["rules_applied"] == ["GP201"] and doc["script"] == "pkg/train.py"
    assert {s["module"] for s in runner.seen} == {"pkg.train"} and runner.seen[0]["args"] == ["--epochs", "1"]
    assert "num_workers=min(" in (tmp_path / "pkg" / "train.py").read_text()
    assert repo.head.commit.hexsha == doc["commit"]
    r = CliRunner().invoke(cli, ["-m", "pkg.nope", "--apply"])
    assert r.exit_code == 2 and "no module pkg.nope" in r.output
    r = CliRunner().invoke(cli, ["pkg/train.py", "-m", "pkg.train", "--apply"])
    assert r.exit_code == 2 and "not both" in r.output
    r = CliRunner().invoke(cli, ["-m", "pkg.train"])  # linting takes paths
    assert r.exit_code == 2 and "only used with --apply" in r.output


def test_ab_baseline_and_regress_take_modules(tmp_path, monkeypatch) -> None:
    git_repo(tmp_path, PKG)
    monkeypatch.chdir(tmp_path)
    runner = ModuleRunner(7)
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    cli_runner = CliRunner()
    r = cli_runner.invoke(cli, ["ab", "-m", "pkg.train", "-m", "pkg.fast", *OPTS, "--json", "-", "--", "--lr", "1"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "faster" and doc["scripts"] == {"a": "-m pkg.train", "b": "-m pkg.fast"}
    assert {s["module"] for s in runner.seen} == {"pkg.train", "pkg.fast"}
    assert all(s["package"] and s["args"] == ["--lr", "1"] for s in runner.seen)
    r = cli_runner.invoke(cli, ["ab", "-m", "pkg.train", *OPTS])
    assert r.exit_code == 2 and "two modules" in r.output
    runner.seen.clear()
    r = cli_runner.invoke(cli, ["baseline", "-m", "pkg.train", *OPTS])
    assert r.exit_code == 0 and "Baseline for pkg/train.py" in r.output
    r = cli_runner.invoke(cli, ["regress", "-m", "pkg.train", *OPTS])
    assert r.exit_code == 0 and "ok: pkg/train.py" in r.output
    assert runner.seen and {s["module"] for s in runner.seen} == {"pkg.train"} and all(s["package"] for s in runner.seen)
    r = cli_runner.invoke(cli, ["baseline", *OPTS])
    assert r.exit_code == 2 and "SCRIPT" in r.output and "-m MODULE" in r.output


def test_library_calls_take_a_module_too(tmp_path, monkeypatch) -> None:
    git_repo(tmp_path, PKG)
    monkeypatch.chdir(tmp_path)
    runner = ModuleRunner(1)
    cfg, mod = CFG, ("pkg.train", tmp_path)
    record_baseline("pkg/train.py", config=cfg, runner=runner, echo=lambda *a, **k: None, module=mod)
    assert not check_regression("pkg/train.py", config=cfg, runner=runner, module=mod)["regressed"]
    assert {s["module"] for s in runner.seen} == {"pkg.train"} and all(s["package"] for s in runner.seen)


def test_run_messages_name_the_users_file_not_the_scratch_copy(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('x')\n")

    def failing(request: RunRequest) -> dict[str, Any]:
        copy = request.script
        return {"status": "crashed", "stderr_tail": f'  File "{copy}", line 1\nboom', "error": f"{copy}: boom"}

    with Workspace(cwd=tmp_path) as ws:
        doc = ws.runner(failing)(run_request(ws.add(ScriptVersion.read(script))))
    assert f'File "{script}", line 1' in doc["stderr_tail"] and doc["error"] == f"{script}: boom"
    assert str(ws.root) not in doc["stderr_tail"]
