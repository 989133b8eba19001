"""`-m MODULE` in the runtime shim and `profile`: run as `python -m` does (real runs, tiny)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli.profile import profile
from gpuperf_rewrite.runtime.process import entry
from gpuperf_rewrite.validate.run import profiling
from gpuperf_rewrite.validate.run.profiling import profile_runner, run_profile
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace

TRAIN = """import sys
import torch
from .model import make, MARK

torch.manual_seed(0)
model = make()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
print("mark", MARK, "args", sys.argv[1:], "package", __package__, "name", __name__)
for step in range(1000):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
MODEL = "import torch\nMARK = 'checkout'\n\ndef make():\n    return torch.nn.Linear(8, 1)\n"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    return tmp_path


def test_profile_runs_a_module_with_package_relative_imports(package: Path, monkeypatch) -> None:
    monkeypatch.chdir(package)
    out = package / "out.json"
    res = CliRunner().invoke(profile, ["-m", "pkg.train", "--steps", "3", "--warmup", "1", "--json", str(out),
                                       "--", "--epochs", "2"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["status"] == "step_limit" and doc["total_steps"] == 4 and len(doc["loss"]) == 4
    assert doc["script"] == str(package / "pkg" / "train.py") and doc["module"] == "pkg.train"
    assert "args ['--epochs', '2'] package pkg name __main__" in doc["stdout_tail"]
    res = CliRunner().invoke(profile, ["-m", "pkg.missing"])
    assert res.exit_code == 2 and "no module pkg.missing" in res.output


def test_a_package_module_run_as_a_file_gets_the_m_hint(package: Path) -> None:
    doc = run_profile(package / "pkg" / "train.py", steps=2, warmup=0, cwd=package)
    assert doc["status"] == "crashed" and "relative import" in doc["error"]
    assert "python -m pkg.train" in doc["stderr_tail"] and f"from {package}" in doc["stderr_tail"]


def test_the_scratch_copy_runs_as_the_module_not_the_checkouts_file(package: Path) -> None:
    """In a mirror, `-m pkg.train` must import the copy under test and its mirrored siblings."""
    copy_source = TRAIN.replace("print(\"mark\"", "print(\"rewritten\", MARK, \"mark\"").encode()
    with Workspace(cwd=package) as ws:
        copy = ws.add(ScriptVersion(package / "pkg" / "train.py", copy_source, ("pkg.train", package)))
        doc = ws.runner(profile_runner)(run_request(copy, ["x"], steps=2, warmup=0, timeout=120, seed=0))
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert "rewritten checkout mark checkout args ['x'] package pkg" in doc["stdout_tail"]
    assert (package / "pkg" / "train.py").read_text() == TRAIN


def test_module_root_and_a_module_that_resolves_elsewhere(tmp_path: Path, monkeypatch) -> None:
    assert entry.module_root("/r/pkg/train.py", "pkg.train") == "/r"
    assert entry.module_root("/r/pkg/__main__.py", "pkg") == "/r"
    assert entry.module_root("/r/a/b/c.py", "a.b.c") == "/r"
    other = tmp_path / "other"
    (other / "pkgx").mkdir(parents=True)
    (other / "pkgx" / "__init__.py").write_text("")
    (other / "pkgx" / "train.py").write_text("")
    (tmp_path / "pkgx").mkdir()
    (tmp_path / "pkgx" / "__init__.py").write_text("")
    (tmp_path / "pkgx" / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    try:
        assert entry.prepare_module("pkgx.train", None) == str(tmp_path / "pkgx" / "train.py")
        with pytest.raises(ImportError, match="resolves to"):  # pkgx is already imported from tmp_path
            entry.prepare_module("pkgx.train", str(other / "pkgx" / "train.py"))
    finally:
        sys.modules.pop("pkgx", None)


# A site hook that takes the dev venv's editable-install finder away from a child, so the child
# finds gpuperf_rewrite only on sys.path, as with a regular install (the wheel on a GPU machine):
# with the finder, any gpuperf_rewrite.runtime resolves through it and the shadowing cannot show.
NO_EDITABLE = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
"""


def test_a_folder_named_gpuperf_rewrite_in_the_working_directory_does_not_shadow_the_shim(
        package: Path, tmp_path: Path) -> None:
    """Issue 30: from this project's root (or any folder holding a ``gpuperf_rewrite/`` without
    ``runtime/``), ``python -m gpuperf_rewrite.runtime.process.parentwatch`` imported that folder and every
    run crashed: "No module named 'gpuperf_rewrite.runtime'", exit 1. The script as a file and as
    a module, the user's own sibling imports still from the working directory."""
    (package / "gpuperf_rewrite").mkdir()
    (package / "gpuperf_rewrite" / "__init__.py").write_text("")
    (package / "helper.py").write_text("MARK = 'cwd helper'\n")
    (package / "train.py").write_text(TRAIN.replace("from .model import make, MARK", "from pkg.model import make\n"
                                                    "from helper import MARK"))
    site = tmp_path / "no-editable"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_EDITABLE)
    env = {**os.environ, "PYTHONPATH": str(site)}
    as_file = run_profile(package / "train.py", steps=2, warmup=0, cwd=package, env=env)
    assert "No module named 'gpuperf_rewrite.runtime'" not in as_file["stderr_tail"]
    assert as_file["status"] == "step_limit", as_file["stderr_tail"]
    assert "mark cwd helper" in as_file["stdout_tail"]
    as_module = run_profile(package / "pkg" / "train.py", ["y"], steps=2, warmup=0, cwd=package, env=env,
                            module="pkg.train")
    assert as_module["status"] == "step_limit", as_module["stderr_tail"]
    assert "mark checkout args ['y'] package pkg" in as_module["stdout_tail"]


@pytest.mark.parametrize("launcher", [None, "torchrun", "accelerate"])
def test_every_launch_starts_the_shim_from_its_staged_file_never_with_python_m(tmp_path: Path, launcher) -> None:
    """The ranks under torchrun and accelerate inherit the working directory too: each starts the
    staged entry file as its training script (a real torchrun run: tests/validate/test_launcher_e2e.py)."""
    stage = profiling._stage_runtime(tmp_path / "stage")
    cmd = profiling._command("py", stage, tmp_path / "t.py", ["--a"], tmp_path / "o.json", steps=2, warmup=1,
                             seed=0, trace_dir=None, launcher=launcher, nproc=2)
    boot = str(stage / profiling.BOOT)
    assert cmd.count(boot) == 1 and profiling.SHIM not in cmd and "gpuperf_rewrite.runtime" not in cmd
    assert cmd[cmd.index(boot) + 1:][-3:] == [str(tmp_path / "t.py"), "--", "--a"]
    assert (launcher is not None) == ("--rank-suffix" in cmd)
    assert f"run_module({profiling.SHIM!r}" in (stage / profiling.BOOT).read_text()
