"""Runs happen in scratch mirrors of the checkout: siblings reachable, writes kept out of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf_rewrite.validate import workspace
from gpuperf_rewrite.validate.workspace import Workspace, WorkspaceError, sweep_stale

SCRIPT = """import json, os, sys
from pathlib import Path
from helper import K

cfg = json.loads(Path(__file__).with_name("settings.json").read_text())
data = open("data/x.csv").read()
resumed = os.path.exists("checkpoints/e1.pt") or Path(__file__).with_name("ckpt.pt").exists()
Path(__file__).with_name("ckpt.pt").write_text("ckpt")
open("existing.log", "a").write("appended\\n")
open("new.log", "w").write("new")
os.makedirs("checkpoints", exist_ok=True)
open("checkpoints/e1.pt", "w").write("x")
with open("data/x.csv", "w") as fh:  # overwrite an input in place: a copy, not the original
    fh.write("clobbered")
print(json.dumps({"K": K, "lr": cfg["lr"], "data": data, "cwd": os.getcwd(), "file": __file__,
                  "resumed": resumed, "argv": sys.argv[1:]}))
"""


def plain_runner(script, args, *, cwd=None, env=None, **kw):
    """`python script args` in ``cwd``: the smallest runner, without the shim."""
    p = subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def checkout(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*")) if ".git" not in p.relative_to(root).parts}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)  # the working tree's root, as git marks it
    (root / "sub").mkdir()
    (root / "data").mkdir()
    (root / "sub" / "train.py").write_text(SCRIPT)
    (root / "sub" / "settings.json").write_text('{"lr": 0.5}')
    (root / "sub" / "helper.py").write_text("K = 7\n")
    (root / "data" / "x.csv").write_text("1,2,3")
    (root / "existing.log").write_text("old\n")
    monkeypatch.chdir(root)  # `gpuperf-rewrite sub/train.py --apply` from the repository root
    monkeypatch.setattr(workspace.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return root


def test_runs_see_the_checkout_and_write_only_to_scratch(tree, tmp_path) -> None:
    before = checkout(tree)
    with Workspace(prefix="gpuperf-apply-") as ws:
        path = ws.add(tree / "sub" / "train.py")
        run = ws.runner(plain_runner)
        first = run(path, ["--x"], steps=1)
        second = run(path, ["--x"], steps=1)
        root = ws.root
    assert first["K"] == 7 and first["lr"] == 0.5 and first["data"] == "1,2,3" and first["argv"] == ["--x"]
    assert Path(first["file"]).name == "train.py" and Path(first["file"]).parent.name == "sub"
    assert Path(first["cwd"]) == Path(first["file"]).parent.parent  # the mirror of the repository root
    assert Path(first["cwd"]).is_relative_to(root)
    assert not first["resumed"] and not second["resumed"]  # no run sees what an earlier run left
    assert second["data"] == "1,2,3"  # the in-place overwrite changed a copy
    assert checkout(tree) == before  # no new file, no modified file, not even __pycache__
    assert not root.exists() and not list((tmp_path / "tmp").iterdir())


def test_the_bytes_under_test_replace_the_script(tree) -> None:
    with Workspace() as ws:
        path = ws.add(tree / "sub" / "train.py", SCRIPT.replace('"K": K', '"K": K + 1').encode())
        assert ws.runner(plain_runner)(path, [])["K"] == 8
    assert (tree / "sub" / "train.py").read_text() == SCRIPT


def test_a_write_that_reaches_the_checkout_stops_the_measurement(tree, monkeypatch) -> None:
    monkeypatch.setattr(workspace, "COPY_FILE_MAX", 100)  # big.bin is reachable only by a symlink
    (tree / "sub" / "big.bin").write_bytes(b"\0" * 1000)
    (tree / "sub" / "train.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('big.bin').write_bytes(b'new')\nprint('{}')\n")
    with Workspace() as ws, pytest.raises(WorkspaceError, match=r"big\.bin.*nothing was written"):
        ws.runner(plain_runner)(ws.add(tree / "sub" / "train.py"), [])

    (tree / "sub" / "train.py").write_text(f"open({str(tree / 'abs.txt')!r}, 'w').write('x')\nprint('{{}}')\n")
    with Workspace() as ws, pytest.raises(WorkspaceError, match="abs|repo"):
        ws.runner(plain_runner)(ws.add(tree / "sub" / "train.py"), [])


def test_big_directories_are_linked_not_copied(tree, monkeypatch) -> None:
    monkeypatch.setattr(workspace, "MAX_ENTRIES", 20)
    (tree / "dataset").mkdir()
    for i in range(50):
        (tree / "dataset" / f"{i}.txt").write_text(str(i))
    mirror = workspace.Mirror.plan(tree / "sub" / "train.py", tree)
    kinds = {e.rel: e.kind for e in mirror.entries}
    assert kinds["dataset"] == "link" and kinds["sub"] == "dir" and kinds["sub/settings.json"] == "copy"
    assert kinds[".git"] == "link" and "sub/train.py" not in kinds
    assert len(mirror.entries) < 20


def test_outside_git_the_script_directory_is_mirrored(tmp_path, monkeypatch) -> None:
    d = tmp_path / "proj"
    d.mkdir()
    (d / "train.py").write_text("x = 1\n")
    (d / "cfg.json").write_text("{}")
    monkeypatch.chdir(tmp_path)  # the caller is outside the mirrored directory
    mirror = workspace.Mirror.plan(d / "train.py", tmp_path)
    assert mirror.base == d.resolve() and mirror.cwd == d.resolve()
    assert [e.rel for e in mirror.entries] == ["cfg.json"]


def test_stale_scratch_of_a_dead_process_is_swept(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    mine = workspace._process_token(os.getpid())
    stale, live, foreign = tmp_path / "gpuperf-apply-a", tmp_path / "gpuperf-apply-b", tmp_path / "gpuperf-apply-c"
    for d in (stale, live, foreign):
        (d / "runs").mkdir(parents=True)
    (stale / workspace.OWNER_FILE).write_text(f"{mine.split(':')[0]}:{pid}:1\n")
    (live / workspace.OWNER_FILE).write_text(mine)
    assert sweep_stale(str(tmp_path)) == [stale]
    assert not stale.exists() and live.exists() and foreign.exists()


def test_with_pythonpath_prepends() -> None:
    env = workspace.with_pythonpath({"PYTHONPATH": "/b", "X": "1"}, "/a")
    assert env == {"PYTHONPATH": os.pathsep.join(["/a", "/b"]), "X": "1"}
    assert workspace.with_pythonpath({}, "/a")["PYTHONPATH"] == "/a"


# -- --apply: the checkout shows nothing of the runs ---------------------------------------------


def _quiet(*a, **k) -> None:
    pass


def test_apply_with_fake_runs_leaves_the_checkout_as_it_was(tmp_path, monkeypatch) -> None:
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from tests.helpers.abfakes import FakeRunner, fake_rewriter, git_repo, repo_state

    from gpuperf_rewrite.validate.abtest import ABConfig
    from gpuperf_rewrite.validate.apply import run_apply

    root = tmp_path / "r"
    repo = git_repo(root, {"sub/train.py": "# fake: speed=100 noise=0.01\n", "sub/settings.json": "{}",
                           "run.log": "old\n"})
    monkeypatch.chdir(root)

    class Writing(FakeRunner):  # reads beside __file__, writes beside it and into its cwd
        def __call__(self, script, args, **kw):
            json.loads(Path(script).with_name("settings.json").read_text())
            Path(script).with_name("ckpt.pt").write_text("x")
            with open(Path(kw.get("cwd") or ".") / "run.log", "a") as fh:
                fh.write("more\n")
            return super().__call__(script, args, **kw)

    cfg = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)
    before = repo_state(repo)
    assert run_apply("sub/train.py", runner=Writing(), rewriter=fake_rewriter(("X2",)), config=cfg,
                     echo=_quiet) == 1
    assert repo_state(repo) == before
    assert run_apply("sub/train.py", runner=Writing(), rewriter=fake_rewriter(("X1",)), config=cfg,
                     echo=_quiet) == 0
    after = repo_state(repo)
    assert after["status"] == "" and set(after["files"]) == set(before["files"])
    assert after["files"]["run.log"] == b"old\n"


TORCH_SCRIPT = """import json
from pathlib import Path

import torch
from helper import SCALE

cfg = json.loads(Path(__file__).with_name("settings.json").read_text())
x = torch.tensor([[float(v) for v in open("data/x.csv").read().split(",")]])
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
log = open("train.log", "a")
for step in range(200):
    loss = model(x * SCALE).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.write(f"{step} {loss.item()}\\n")
    log.flush()
    torch.save(model.state_dict(), Path(__file__).with_name("ckpt.pt"))
    torch.save(model.state_dict(), "latest.pt")
    open("new_log.txt", "a").write("x")
"""


@pytest.mark.slow
def test_apply_with_the_real_shim_leaves_the_checkout_as_it_was(tmp_path, monkeypatch) -> None:
    """A real training script (CPU torch) that reads beside itself and relative to its cwd and
    writes checkpoints and logs to both: --apply runs it, the checkout is unchanged."""
    pytest.importorskip("torch")
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from tests.helpers.abfakes import git_repo, repo_state

    from gpuperf_rewrite.validate.abtest import ABConfig
    from gpuperf_rewrite.validate.apply import run_apply

    root = tmp_path / "r"
    repo = git_repo(root, {"sub/train.py": TORCH_SCRIPT, "sub/helper.py": "SCALE = 0.5\n",
                           "sub/settings.json": '{"lr": 0.01}', "data/x.csv": "1,2,3", "train.log": "old\n"})
    (root / "latest.pt").write_bytes(b"an older checkpoint, untracked")
    monkeypatch.chdir(root)

    def rewrite(data: bytes, codes):  # B writes the same files, then fails at step 3: broken
        new = data.replace(b"    opt.step()\n", b"    opt.step()\n    if step == 3:\n        raise SystemExit(3)\n")
        return new, {"GPX": 1}

    out: list[str] = []
    before = repo_state(repo)
    rc = run_apply("sub/train.py", rewriter=rewrite, config=ABConfig(runs=5, max_runs=5, steps=4, warmup=1,
                                                                  timeout=120),
                   echo=lambda m="", err=False: out.append(str(m)))
    text = "\n".join(out)
    assert rc == 1, text
    assert "BROKEN" in text.upper() and "B run 1" in text  # A ran to its step limit; B ran and failed
    assert repo_state(repo) == before
