"""A scratch mirror is laid out once per workspace and put back in place between runs (issue 20,
item 6: 20,000 small files beside a script were made again, and deleted, for every run)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuperf_rewrite.validate.run import workspace
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace

FILES = 300


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A repository with many small files beside the script, a small data directory, a file too
    big to copy (a link) and a directory past the entry budget (a link)."""
    monkeypatch.setattr(workspace, "COPY_FILE_MAX", 1000)
    monkeypatch.setattr(workspace, "MAX_ENTRIES", FILES + 40)
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "train.py").write_text("print('{}')\n")
    for i in range(FILES):
        (root / f"shard_{i:03d}.txt").write_text(f"{i}\n")
    (root / "data" / "sub").mkdir(parents=True)
    (root / "data" / "x.csv").write_text("1,2,3")
    (root / "data" / "sub" / "y.txt").write_text("y")
    (root / "big.bin").write_bytes(b"\0" * 5000)
    (root / "many").mkdir()
    for i in range(60):
        (root / "many" / f"{i}.txt").write_text(str(i))
    monkeypatch.chdir(root)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return root


def state(root: Path) -> dict[str, object]:
    """What a run can observe of a mirror: every entry's kind, bytes or target, and mode."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", Path(p).read_bytes(), stat.S_IMODE(st.st_mode))
    return out


class Counting:
    """Counts the filesystem entries the workspace makes (copies, links, directories)."""

    def __init__(self, monkeypatch) -> None:
        self.n = 0
        for owner, name in ((shutil, "copy2"), (os, "symlink"), (os, "mkdir")):
            orig = getattr(owner, name)

            def counted(*a, _orig=orig, **k):
                self.n += 1
                return _orig(*a, **k)

            monkeypatch.setattr(owner, name, counted)


def test_a_second_run_makes_no_entry_the_first_left_alone(tree, monkeypatch) -> None:
    seen: list[dict[str, object]] = []

    def runner(request):  # reads, writes nothing
        seen.append(state(Path(request.cwd)))
        return {}

    with Workspace() as ws:
        path = ws.add(ScriptVersion.read(tree / "train.py"))
        run = ws.runner(runner)
        run(run_request(path))
        counting = Counting(monkeypatch)
        run(run_request(path))
        run(run_request(path))
    assert counting.n <= 5, counting.n  # not one per file beside the script (there are over 300)
    assert len(seen[0]) > FILES and seen[0] == seen[1] == seen[2]


CHANGES = """import os, sys
from pathlib import Path
here = Path(__file__).parent
open(here / "shard_001.txt", "a").write("appended")          # a copy, written in place
open(here / "shard_002.txt", "w").write("9\\n")               # same size, same clock tick
os.remove(here / "shard_003.txt")
os.rename(here / "shard_004.txt", here / "renamed.txt")
open("new.log", "w").write("new")
os.makedirs("checkpoints/deep", exist_ok=True)
open("checkpoints/deep/e1.pt", "wb").write(b"x")
os.chmod("checkpoints", 0o500)
open(here / "big.bin", "r+b").write(b"private")              # a link: the guard copies it first
open("many/0.txt", "a").write("!")                            # inside a linked directory
os.remove(here / "data/sub/y.txt")
os.rmdir(here / "data/sub")
os.symlink("/", here / "data/sub")
os.chmod(here / "data", 0o500)
os.chmod(here / "shard_005.txt", 0o600)
os.utime(here / "shard_006.txt", ns=(1, 1))
os.remove(__file__)
os.symlink("/etc/hostname", __file__)
print("{}")
"""


def guarded(request):
    """The script under the shim's write guard, as the real runs are."""
    code = ("import runpy, sys\nfrom gpuperf_rewrite.runtime.process import guard\nguard.install_from_env()\n"
            "sys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", code, request.script, *request.args], cwd=request.cwd, env=request.env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {}


def test_what_a_run_changed_is_put_back_before_the_next_run(tree, tmp_path) -> None:
    """Each run starts from the state of a fresh mirror, whatever the last one added, removed,
    replaced, wrote in place or chmod-ed; the checkout is untouched."""
    fresh = workspace.Mirror.plan(tree / "train.py", tree)
    fresh.materialize(tmp_path / "fresh", (tree / "train.py").read_bytes())
    expected = state(tmp_path / "fresh")
    seen: list[dict[str, object]] = []
    (tree / "train.py").write_text(CHANGES)

    def record(request):
        seen.append(state(Path(request.cwd)))
        return {}

    with Workspace() as ws:
        path = run_request(ws.add(ScriptVersion.read(tree / "train.py")))
        first = run_request(ws.add(ScriptVersion(tree / "train.py", b"print('{}')\n")))  # same mirror, other bytes
        ws.runner(record)(first)
        ws.runner(guarded)(path)
        ws.runner(record)(first)
        ws.runner(guarded)(path)  # what the guard copied in the first run is a link again
        ws.runner(record)(first)
        made = ws.mirror(tree / "train.py").made_last
    assert seen[0] == expected
    assert seen[1] == expected, {k: (seen[1].get(k), v) for k, v in expected.items() if seen[1].get(k) != v}
    assert set(seen[1]) == set(expected) and seen[2] == expected
    assert 0 < made < 20  # what the run changed, not the mirror
    assert (tree / "big.bin").read_bytes() == b"\0" * 5000 and (tree / "many" / "0.txt").read_text() == "0"
    assert (tree / "shard_003.txt").exists() and not (tree / "new.log").exists()


def test_a_change_made_in_the_same_clock_tick_is_still_seen(tree) -> None:
    """An in-process runner writes the moment it is called: no time for the clock to move on."""
    def write(request):
        cwd = request.cwd
        out = {"before": Path(cwd, "shard_007.txt").read_text(), "left": Path(cwd, "left.txt").exists()}
        Path(cwd, "shard_007.txt").write_text("8\n")  # same size
        Path(cwd, "left.txt").write_text("x")
        return out

    with Workspace() as ws:
        run = ws.runner(write)
        path = run_request(ws.add(ScriptVersion.read(tree / "train.py")))
        docs = [run(path) for _ in range(3)]
    assert docs == [{"before": "7\n", "left": False}] * 3


def test_a_changed_original_is_copied_again_as_a_fresh_mirror_would(tree) -> None:
    def editor(request):
        doc = {"readme": Path(request.cwd, "shard_010.txt").read_text()}
        if doc["readme"] != "edited\n":
            (tree / "shard_010.txt").write_text("edited\n")  # an editor saves it during the first run
        return doc

    warnings: list[str] = []
    with Workspace(warn=warnings.append) as ws:
        run, path = ws.runner(editor), run_request(ws.add(ScriptVersion.read(tree / "train.py")))
        docs = [run(path) for _ in range(2)]
    assert docs == [{"readme": "10\n"}, {"readme": "edited\n"}]
    assert len(warnings) == 1 and "shard_010.txt" in warnings[0]


def test_the_guard_protects_what_was_resolved_once(tree) -> None:
    with Workspace() as ws:
        mirror = ws.mirror(tree / "train.py")
        first = mirror.protected()
        assert mirror.protected() is first  # not every symlink resolved again for every run
    assert os.path.realpath(tree) in first


def test_the_guard_sees_a_workspace_runs_in_one_place(tree) -> None:
    def where(request):
        return {"scratch": json.loads(request.env["GPUPERF_GUARD"])["scratch"], "cwd": request.cwd}

    with Workspace() as ws:
        run, path = ws.runner(where), run_request(ws.add(ScriptVersion.read(tree / "train.py")))
        a, b = run(path), run(path)
    assert a == b and Path(a["cwd"]).is_relative_to(a["scratch"])
