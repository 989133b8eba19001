"""Runs happen in scratch mirrors of the checkout: siblings reachable, writes kept out of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuperf_rewrite.validate.run import scratch, workspace
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace, WorkspaceError, sweep_stale

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


def plain_runner(request):
    """`python script args` in ``cwd``: the smallest runner, without the shim."""
    p = subprocess.run([sys.executable, request.script, *request.args], cwd=request.cwd, env=request.env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


GUARDED = ("import os, runpy, sys\n"
           "from gpuperf_rewrite.runtime.process import guard\n"
           "guard.install_from_env()\n"
           "sys.argv = sys.argv[1:]\n"
           "sys.path[0] = os.path.dirname(sys.argv[0])\n"
           "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def guarded_runner(request):
    """`python script args` with the shim's write guard installed, as the real shim does."""
    p = subprocess.run([sys.executable, "-c", GUARDED, request.script, *request.args], cwd=request.cwd,
                       env=request.env,
                       capture_output=True, text=True, timeout=120)
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


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
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return root


def test_runs_see_the_checkout_and_write_only_to_scratch(tree, tmp_path) -> None:
    before = checkout(tree)
    with Workspace(prefix="gpuperf-apply-") as ws:
        path = ws.add(ScriptVersion.read(tree / "sub" / "train.py"))
        run = ws.runner(plain_runner)
        first = run(run_request(path, ["--x"], steps=1))
        second = run(run_request(path, ["--x"], steps=1))
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
        path = ws.add(ScriptVersion(tree / "sub" / "train.py", SCRIPT.replace('"K": K', '"K": K + 1').encode()))
        assert ws.runner(plain_runner)(run_request(path))["K"] == 8
    assert (tree / "sub" / "train.py").read_text() == SCRIPT


def test_an_unguarded_write_through_a_mirror_link_stops_the_measurement(tree, monkeypatch) -> None:
    """What the guard cannot see (here: no guard at all, as for native code) is still caught
    afterwards when it changed an original the run reaches only through a mirror link."""
    monkeypatch.setattr(workspace, "COPY_FILE_MAX", 100)  # big.bin is reachable only by a symlink
    (tree / "sub" / "big.bin").write_bytes(b"\0" * 1000)
    (tree / "sub" / "train.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('big.bin').write_bytes(b'new')\nprint('{}')\n")
    with Workspace() as ws, pytest.raises(WorkspaceError, match=r"big\.bin.*nothing was written"):
        ws.runner(plain_runner)(run_request(ws.add(ScriptVersion.read(tree / "sub" / "train.py"))))


WRITES_THROUGH_LINKS = """import json, os
from pathlib import Path
here = Path(__file__).parent
open(here / "big.bin", "wb").write(b"new")                 # truncating write through a link
with open(here / "big2.bin", "ab") as fh:                   # appending one: sees the old bytes
    fh.write(b"+")
size2 = (here / "big2.bin").stat().st_size
os.makedirs("dataset/cache", exist_ok=True)                 # inside a directory linked as a whole
open("dataset/cache/x.pt", "wb").write(b"x")
open("dataset/0.txt", "a").write("more")
os.remove("dataset/1.txt")
os.rename("dataset/2.txt", "dataset/2b.txt")
os.utime(here / "big2.bin")
print(json.dumps({"size2": size2, "big": (here / "big.bin").read_text()}))
"""


def test_writes_through_mirror_links_get_private_copies(tree, monkeypatch) -> None:
    monkeypatch.setattr(workspace, "COPY_FILE_MAX", 100)  # files over the copy limit are links
    monkeypatch.setattr(workspace, "MAX_ENTRIES", 20)  # dataset/ is past the entry budget: a link
    (tree / "sub" / "big.bin").write_bytes(b"\0" * 1000)
    (tree / "sub" / "big2.bin").write_bytes(b"\1" * 1000)
    (tree / "dataset").mkdir()
    for i in range(30):
        (tree / "dataset" / f"{i}.txt").write_text(str(i))
    (tree / "sub" / "train.py").write_text(WRITES_THROUGH_LINKS)
    before = checkout(tree)
    stamps = {p: os.stat(p).st_mtime_ns for p in (tree / "sub" / "big2.bin", tree / "dataset")}
    with Workspace() as ws:
        mirror = ws.mirror(tree / "sub" / "train.py")
        kinds = {e.rel: e.kind for e in mirror.entries}
        assert kinds["sub/big.bin"] == kinds["sub/big2.bin"] == kinds["dataset"] == "link"
        doc = ws.runner(guarded_runner)(run_request(ws.add(ScriptVersion.read(tree / "sub" / "train.py"))))
    assert doc["rc"] == 0, doc["stderr"]
    assert json.loads(doc["stdout"]) == {"size2": 1001, "big": "new"}  # ran as in the checkout
    assert checkout(tree) == before  # byte for byte, and no file added or removed
    assert stamps == {p: os.stat(p).st_mtime_ns for p in stamps}


def test_a_write_into_the_checkout_by_absolute_path_is_refused_before_it_happens(tree) -> None:
    ckpt = tree / "ckpt.pt"
    ckpt.write_bytes(b"the user's checkpoint")
    (tree / "sub" / "train.py").write_text(
        f"try:\n    open({str(ckpt)!r}, 'wb').write(b'overwritten')\nexcept Exception:\n    pass\n"
        f"open('after.txt', 'w').write('the script went on')\nprint('{{}}')\n")
    warnings: list[str] = []
    with Workspace(warn=warnings.append) as ws, \
            pytest.raises(WorkspaceError, match=r"ckpt\.pt.*refused before it happened"):
        ws.runner(guarded_runner)(run_request(ws.add(ScriptVersion.read(tree / "sub" / "train.py"))))
    assert ckpt.read_bytes() == b"the user's checkpoint" and not warnings

    (tree / "sub" / "train.py").write_text(f"import os\nos.remove({str(ckpt)!r})\n")
    with Workspace() as ws, pytest.raises(WorkspaceError, match=r"ckpt\.pt"):
        ws.runner(guarded_runner)(run_request(ws.add(ScriptVersion.read(tree / "sub" / "train.py"))))
    assert ckpt.read_bytes() == b"the user's checkpoint"


def test_a_change_the_script_did_not_make_is_a_warning_naming_the_file(tree) -> None:
    (tree / "README.md").write_text("read me\n")

    def editor_meanwhile(request):  # an editor saves README.md and leaves a swap file
        (tree / "README.md").write_text("read me, edited\n")
        (tree / ".README.md.swp").write_bytes(b"swap")
        (tree / "sub" / ".train.py.swp").write_bytes(b"swap")
        os.utime(tree / "existing.log", ns=(1, 1))  # `touch`
        return plain_runner(request)

    warnings: list[str] = []
    with Workspace(warn=warnings.append) as ws:
        path = ws.add(ScriptVersion.read(tree / "sub" / "train.py"))
        ws.runner(editor_meanwhile)(run_request(path))
        ws.runner(plain_runner)(run_request(path))  # nothing new: nothing more to say
    assert len(warnings) == 1, warnings
    assert "README.md" in warnings[0] and "existing.log" in warnings[0] and "not by the script" in warnings[0]
    assert ".swp" not in warnings[0] and str(tree) + "," not in warnings[0]


TOOL = """import sys
from pathlib import Path
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace, WorkspaceError

def noisy(request):  # the tool reports progress while the runs go on
    for i in range(20):
        print("progress", i, flush=True)
        print("status", i, file=sys.stderr, flush=True)
    return {}

with Workspace() as ws:
    run = ws.runner(noisy)
    path = ws.add(ScriptVersion.read(sys.argv[1]))
    try:
        run(run_request(path)); run(run_request(path))
    except WorkspaceError as exc:
        print("ERROR", exc, flush=True)
        sys.exit(2)
print("DONE", flush=True)
"""


@pytest.mark.parametrize("how", ["> apply.log 2>&1", "2>&1 | tee apply.log", "| tee -a apply.log"])
def test_the_tools_own_output_in_the_checkout_never_counts(tree, tmp_path, how) -> None:
    (tree / "tool.py").write_text(TOOL)
    (tree / "apply.log").write_text("")  # as the shell creates it before the tool starts
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    p = subprocess.run(f"{sys.executable} tool.py sub/train.py {how}", shell=True, cwd=tree, env=env,
                       capture_output=True, text=True, timeout=120)
    log = (tree / "apply.log").read_text()
    assert p.returncode == 0, log + p.stdout
    assert "DONE" in log and "changed during" not in log + p.stdout + p.stderr


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
    mine = scratch._process_token(os.getpid())
    stale, live, foreign = tmp_path / "gpuperf-apply-a", tmp_path / "gpuperf-apply-b", tmp_path / "gpuperf-apply-c"
    for d in (stale, live, foreign):
        (d / "runs").mkdir(parents=True)
    (stale / scratch.OWNER_FILE).write_text(f"{mine.split(':')[0]}:{pid}:1\n")
    (live / scratch.OWNER_FILE).write_text(mine)
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

    from gpuperf_rewrite.validate.judge.abtest import ABConfig
    from gpuperf_rewrite.validate.apply import run_apply

    root = tmp_path / "r"
    repo = git_repo(root, {"sub/train.py": "# fake: speed=100 noise=0.01\n", "sub/settings.json": "{}",
                           "run.log": "old\n"})
    monkeypatch.chdir(root)

    class Writing(FakeRunner):  # reads beside __file__, writes beside it and into its cwd
        def __call__(self, request):
            json.loads(Path(request.script).with_name("settings.json").read_text())
            Path(request.script).with_name("ckpt.pt").write_text("x")
            with open(Path(request.cwd or ".") / "run.log", "a") as fh:
                fh.write("more\n")
            return super().__call__(request)

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

    from gpuperf_rewrite.validate.judge.abtest import ABConfig
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
