"""``--apply`` across a project: the entry script and the first-party modules it runs are rewritten,
measured together as one version and committed in one commit (fake runs; one real e2e, slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")
git = pytest.importorskip("git")

from tests.helpers.abfakes import (FakeRunner, apply_with_fakes, fake_rewriter, git_repo,  # noqa: E402
                                   project_rewriters, repo_state)
from tests.helpers.paths import HELPERS, ROOT  # noqa: E402

from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write_set  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.record import gitops  # noqa: E402
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request  # noqa: E402
from gpuperf_rewrite.validate.run.workspace import Workspace  # noqa: E402

CFG = ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)
# main.py builds and calls engine.train_one_epoch; the fake runner reads engine.py's `# fake:` line
# from the run's mirror, so a fix there is only measured if the mirror holds B's engine.py.
MAIN = "# fake: speed=100 noise=0.01 modules=engine\nimport engine\n\nengine.train_one_epoch()\n"
ENGINE = "# fake: speed=100\ndef train_one_epoch():\n    pass\n"


@pytest.fixture
def project(tmp_path):
    return git_repo(tmp_path, {"main.py": MAIN, "engine.py": ENGINE, "notes.txt": "x\n"})


def _apply(tmp_path: Path, per_file: dict[str, tuple[str, ...]], **kw) -> int:
    rc, _apply.output = apply_with_fakes(tmp_path / "main.py", per_file, **{"config": CFG, **kw})  # type: ignore[attr-defined]
    return rc


def _note(repo) -> dict:
    (rec,) = gitops.parse_note(gitops.read_note(repo, repo.head.commit.hexsha))
    return rec


def test_fixes_in_both_files_are_validated_together_and_committed_in_one_commit(project, tmp_path) -> None:
    head = project.head.commit.hexsha
    assert _apply(tmp_path, {"main.py": ("X2",), "engine.py": ("X1",)}, json_out=True) == 0, _apply.output
    new = project.head.commit
    assert new.parents[0].hexsha == head and sorted(new.stats.files) == ["engine.py", "main.py"]
    assert "in main.py, engine.py" in new.message.splitlines()[0]
    assert "Files: main.py (X2); engine.py (X1)" in new.message
    assert "speed=150" in (tmp_path / "engine.py").read_text()  # the gain came from engine.py's fix
    assert "# fixed by X2" in (tmp_path / "main.py").read_text()
    assert project.git.status("--porcelain") == ""
    rec = _note(project)
    assert rec["script"] == "main.py" and rec["rules"] == ["X1", "X2"] and rec["ab"]["verdict"] == "faster"
    assert rec["files"] == [{"path": "main.py", "rules": ["X2"]}, {"path": "engine.py", "rules": ["X1"]}]
    doc = json.loads(_apply.output[_apply.output.index("{"):])
    assert doc["status"] == "committed" and doc["plan"]["files"] == {"X1": ["engine.py"], "X2": ["main.py"]}
    by_path = {f["path"]: f for f in doc["files"]}
    assert by_path["engine.py"]["rules_applied"] == ["X1"] and by_path["engine.py"]["role"] == "module"
    assert by_path["main.py"]["status"] == "rewritten" and by_path["main.py"]["role"] == "script"


def test_a_rejected_project_rewrite_leaves_both_files_untouched(project, tmp_path) -> None:
    before = repo_state(project)
    assert _apply(tmp_path, {"main.py": ("X2",), "engine.py": ("SLOW",)}) == 1
    assert "main.py, engine.py are unchanged and nothing was committed" in _apply.output
    assert repo_state(project) == before and not gitops.notes_map(project)


def test_a_subset_is_a_set_of_codes_across_files(project, tmp_path) -> None:
    """LOSS in main.py breaks training, X1 in engine.py is faster: the search drops main.py's fix
    and commits engine.py alone, like it would two fixes of one file."""
    assert _apply(tmp_path, {"main.py": ("LOSS",), "engine.py": ("X1",)}) == 0, _apply.output
    assert list(project.head.commit.stats.files) == ["engine.py"]
    assert (tmp_path / "main.py").read_text() == MAIN
    assert "dropped LOSS: LOSS alone: broken" in _apply.output
    assert "main.py: unchanged" in _apply.output and "engine.py: X1" in _apply.output


def test_the_mirror_holds_the_version_s_modules_and_a_runs_the_originals(tmp_path) -> None:
    """A version's companions replace the user's files in its runs only; the next run of
    another version (A) sees the original again, also where the mirror holds the file as a link."""
    big = "# fake: speed=100\n" + "#" * (5 << 20) + "\n"  # over the copy limit: a link in the mirror
    (tmp_path / "models").mkdir()
    files = {"main.py": MAIN, "engine.py": ENGINE, "big.py": big, "models/__init__.py": "net = 1\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    seen: list[tuple[str, ...]] = []

    def runner(request):
        here = Path(request.script).parent
        seen.append(tuple((here / name).read_text()[:18] for name in list(files)[1:]))
        return {"status": "step_limit"}

    with Workspace(cwd=tmp_path) as ws:
        run = ws.runner(runner)
        b_files = {name: f"B {name}\n" for name in list(files)[1:]}
        a = ws.add(ScriptVersion(tmp_path / "main.py", MAIN.encode(),  # A's companions: the originals
                                 companions=tuple((tmp_path / n, files[n].encode()) for n in b_files)))
        b = ws.add(ScriptVersion(tmp_path / "main.py", MAIN.encode(),
                                 companions=tuple((tmp_path / n, t.encode()) for n, t in b_files.items())))
        for path in (a, b, a, b, a):
            run(run_request(str(path)))
    a_seen, b_seen = tuple(files[n][:18] for n in b_files), tuple(t[:18] for t in b_files.values())
    assert seen == [a_seen, b_seen, a_seen, b_seen, a_seen]
    assert {n: (tmp_path / n).read_text() for n in files} == files


def test_a_module_with_uncommitted_changes_is_not_rewritten_and_said(project, tmp_path) -> None:
    (tmp_path / "engine.py").write_text(ENGINE + "# my edit\n")
    assert _apply(tmp_path, {"main.py": ("X1",), "engine.py": ("X1",)}) == 0, _apply.output
    assert list(project.head.commit.stats.files) == ["main.py"]
    assert "engine.py: has fixes (X1) but is not rewritten: engine.py has uncommitted changes" in _apply.output
    assert "Not rewritten: engine.py" in project.head.commit.message
    assert (tmp_path / "engine.py").read_text() == ENGINE + "# my edit\n"


def test_a_module_another_script_imports_is_rewritten_only_where_the_fix_is_the_same(project, tmp_path) -> None:
    (tmp_path / "evaluate.py").write_text("import engine\n\nif __name__ == '__main__':\n    engine.train_one_epoch()\n")
    project.index.add(["evaluate.py"])
    project.index.commit("an evaluation script")
    from gpuperf_rewrite.validate.apply import run_apply

    same = project_rewriters({"main.py": ("X2",), "engine.py": ("X1",)})
    lines: list[str] = []
    echo = lambda m="", **k: lines.append(str(m))  # noqa: E731
    assert run_apply(str(tmp_path / "main.py"), runner=FakeRunner(), config=CFG, rewriter_for=same, echo=echo) == 0
    assert "engine.py: X1 (also imported by evaluate.py: validated through main.py only)" in "\n".join(lines)
    project.git.reset("--hard", "HEAD~1")

    def differs(file: Path, entry: Path):  # engine.py's fix would not be the same from evaluate.py
        if file.name == "engine.py":
            return fake_rewriter(("X1",) if entry.name == "main.py" else ("X2",))
        return same(file, entry)

    lines.clear()
    assert run_apply(str(tmp_path / "main.py"), runner=FakeRunner(), config=CFG, rewriter_for=differs, echo=echo) == 1
    text = "\n".join(lines)
    assert "engine.py: has fixes (X1) that differ when evaluate.py imports it" in text
    assert (tmp_path / "engine.py").read_text() == ENGINE  # main.py's neutral fix alone: rejected


def test_without_git_both_files_are_written_as_a_set(tmp_path) -> None:
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "engine.py").write_text(ENGINE)
    assert _apply(tmp_path, {"main.py": ("X2",), "engine.py": ("X1",)}) == 0, _apply.output
    assert "speed=150" in (tmp_path / "engine.py").read_text() and "fixed by X2" in (tmp_path / "main.py").read_text()
    assert f"Wrote {tmp_path / 'main.py'}, {tmp_path / 'engine.py'}" in _apply.output


# -- writing a set of files -----------------------------------------------------------------------


def test_atomic_write_set_puts_every_file_back_when_one_cannot_be_written(tmp_path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("a\n")
    b.write_text("b\n")
    with pytest.raises(WriteRefused):  # checked before anything is written
        atomic_write_set([(a, b"A\n", b"a\n"), (b, b"B\n", b"changed meanwhile\n")])
    assert (a.read_text(), b.read_text()) == ("a\n", "b\n")

    def interrupted(i: int) -> None:
        if i == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # between the renames
        atomic_write_set([(a, b"A\n", b"a\n"), (b, b"B\n", b"b\n")], after_each=interrupted)
    assert (a.read_text(), b.read_text()) == ("a\n", "b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temporary left
    atomic_write_set([(a, b"A\n", b"a\n"), (b, b"B\n", b"b\n")])
    assert (a.read_text(), b.read_text()) == ("A\n", "B\n")


def _driver(script: Path, codes: str, crash: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["TMPDIR"] = str(script.parent.with_name(script.parent.name + "-tmp"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env[gitops.CRASH_ENV] = crash
    return subprocess.Popen([sys.executable, str(HELPERS / "apply_driver.py"), str(script), codes, "4"],
                            cwd=script.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("point", ["sigint_between_writes", "sigterm_between_writes", "between_writes",
                                   "after_index"])
def test_an_interrupt_between_the_two_writes_leaves_both_files_as_they_were(project, tmp_path, point) -> None:
    before = repo_state(project)
    proc = _driver(tmp_path / "main.py", "main.py=X2;engine.py=X1", point)
    _, err = proc.communicate(timeout=120)
    if point == "between_writes":
        # SIGKILL cannot be caught: main.py is new, engine.py old (its new bytes still in the
        # prepared temporary), refs and notes untouched. The next --apply in the repository puts
        # main.py back from the commit's journal before anything else (docs/safety.md).
        assert proc.returncode == -signal.SIGKILL
        after = repo_state(project)
        assert after["head"] == before["head"] and after["refs"] == before["refs"]
        (tmp,) = tmp_path.glob(".engine.py.*.gpuperf-tmp")
        assert after["status"] == f" M main.py\n?? {tmp.name}"
        assert _apply(tmp_path, {"main.py": ("SLOW",)}) == 1, _apply.output  # rejected: it only cleans up
        assert "Put back main.py, left rewritten by an --apply killed before its commit existed" in _apply.output
    elif point == "after_index":  # killed with both files written and staged, before the refs moved
        assert proc.returncode == -signal.SIGKILL
        assert repo_state(project)["status"] == "M  engine.py\nM  main.py"
        assert _apply(tmp_path, {"main.py": ("SLOW",)}) == 1
        assert "Put back main.py, engine.py" in _apply.output
    else:
        assert proc.returncode == (130 if point.startswith("sigint") else 143), err
        assert "nothing was changed" in err
    assert repo_state(project) == before
    assert not (tmp_path / ".git" / "gpuperf-apply-journal.json").exists()


def test_a_hook_refusing_a_two_file_commit_puts_both_back(project, tmp_path) -> None:
    hook = tmp_path / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'no thanks' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = repo_state(project)
    assert _apply(tmp_path, {"main.py": ("X2",), "engine.py": ("X1",)}) == 2
    assert "no thanks" in _apply.output
    assert "Nothing was committed; main.py, engine.py are as they were" in _apply.output
    assert repo_state(project) == before


# -- the real runtime shim --------------------------------------------------------------------------

REAL_MAIN = """import torch

import engine

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1000):
    engine.train_step(model, opt, x, y)
"""
REAL_ENGINE = """import time

import torch


def train_step(model, opt, x, y):
    time.sleep(0.03)  # what the fix below removes: a stand-in for a per-step cost in the module
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _real_fixes(file: Path, entry: Path):
    def rewrite(data: bytes, codes):
        if file.name == "engine.py" and (codes is None or "GPX" in codes):
            return data.replace(b"time.sleep(0.03)", b"time.sleep(0.003)"), {"GPX": 1}
        if file.name == "main.py" and (codes is None or "GPY" in codes):
            return data + b"# checked\n", {"GPY": 1}
        return None, {}

    return rewrite


@pytest.mark.slow
@pytest.mark.timing
def test_real_runs_import_the_rewritten_module_from_the_mirror_and_commit_both(tmp_path) -> None:
    """Real runs under the shim: only engine.py's fix can make B faster, so a `faster` verdict
    means B's runs imported B's engine.py from the scratch mirror; both files land in one commit."""
    pytest.importorskip("torch")
    from gpuperf_rewrite.validate.apply import run_apply

    repo = git_repo(tmp_path, {"main.py": REAL_MAIN, "engine.py": REAL_ENGINE})
    out: list[str] = []
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        rc = run_apply("main.py", rewriter_for=_real_fixes, echo=lambda m="", **k: out.append(str(m)),
                       config=ABConfig(runs=3, max_runs=3, steps=8, warmup=2, timeout=300, alpha=0.2,
                                       early_stop=False, bootstrap_resamples=300))
    finally:
        os.chdir(cwd)
    assert rc == 0, "\n".join(out)
    assert sorted(repo.head.commit.stats.files) == ["engine.py", "main.py"]
    assert "time.sleep(0.003)" in (tmp_path / "engine.py").read_text()
    rec = _note(repo)
    assert rec["ab"]["speedup"] > 1.5 and rec["ab"]["loss_check"]["status"] == "passed"
    assert repo.git.status("--porcelain") == ""


CLI_MAIN = """# fake: speed=100 noise=0.01 modules=engine fast_if=non_blocking=True
import torch
from torch.utils.data import DataLoader, TensorDataset

import engine

model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8)
if __name__ == "__main__":
    for epoch in range(2):
        engine.train_one_epoch(model, loader, optimizer, "cpu")
"""
CLI_ENGINE = """import torch


def train_one_epoch(model, loader, optimizer, device):
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_cli_apply_rewrites_the_script_and_its_module_with_the_real_rules(tmp_path, monkeypatch) -> None:
    """`gpuperf-rewrite main.py --apply`: the rules fix main.py (GP201) and engine.py (GP104);
    the fake runs are faster only when B's engine.py is in the run's mirror."""
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli
    from gpuperf_rewrite.validate import apply
    from gpuperf_rewrite.validate.judge import abtest

    repo = git_repo(tmp_path, {"main.py": CLI_MAIN, "engine.py": CLI_ENGINE})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(3))
    monkeypatch.setattr(apply, "rule_gains_on", lambda code: "any")  # GP104 gains on CUDA: tried here anyway
    r = CliRunner().invoke(cli, ["main.py", "--apply", "--select", "GP104,GP201", "--runs", "6", "--steps", "3",
                                 "--warmup", "1", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "committed" and doc["rules_applied"] == ["GP104", "GP201"]
    assert {f["path"]: f["rules_applied"] for f in doc["files"]} == {"main.py": ["GP201"], "engine.py": ["GP104"]}
    assert sorted(repo.head.commit.stats.files) == ["engine.py", "main.py"]
    assert "non_blocking=True" in (tmp_path / "engine.py").read_text()
    assert "num_workers=" in (tmp_path / "main.py").read_text()


def test_no_validate_rewrites_the_script_and_its_modules_with_the_project_facts(tmp_path, monkeypatch) -> None:
    """The engine_split project (tests/rules/projects): main.py's fixes come from the facts of
    models/ and utils.py, engine.py's autocast from its own loop; --apply main.py writes both,
    exactly as `--fix --unsafe-fixes` on the two files would, and nothing else."""
    import shutil

    from gpuperf_rewrite.lint.api import load_settings
    from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply

    src = ROOT / "tests" / "rules" / "projects" / "engine_split"
    shutil.copytree(src, tmp_path / "p")
    monkeypatch.chdir(tmp_path / "p")
    out: list[str] = []
    rc = run_apply("main.py", settings=load_settings(),
                   options=ApplyOptions(no_validate=True, json_out=True), echo=lambda m="", **k: out.append(str(m)))
    assert rc == 0, out
    doc = json.loads(out[-1])
    assert doc["status"] == "written_unvalidated"
    assert {f["path"]: sorted(f["rules"]) for f in doc["files"]} == {
        "main.py": ["GP302", "GP303", "GP304", "GP305"], "engine.py": ["GP301"]}
    assert "torch.autocast(" in (tmp_path / "p" / "engine.py").read_text()
    assert "model.compile()" in (tmp_path / "p" / "main.py").read_text()
    for unchanged in ("utils.py", "models/__init__.py", "models/resnet.py"):
        assert (tmp_path / "p" / unchanged).read_bytes() == (src / unchanged).read_bytes()


def test_no_commit_interrupted_between_the_two_writes_leaves_both_files(project, tmp_path, monkeypatch) -> None:
    """--no-commit writes the set itself: a Ctrl-C delivered right after the first rename is
    raised before the second, and main.py gets its old bytes back."""
    import gpuperf_rewrite.lint.sourceio as sourceio

    real, calls = os.replace, []

    def replace_then_ctrl_c(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == 1 and str(dst).endswith("main.py"):
            os.kill(os.getpid(), signal.SIGINT)  # held by the write; raised between the renames

    monkeypatch.setattr(sourceio.os, "replace", replace_then_ctrl_c)
    before = repo_state(project)
    assert _apply(tmp_path, {"main.py": ("X2",), "engine.py": ("X1",)}, no_commit=True) == 130
    assert "Interrupted: nothing was changed." in _apply.output
    assert repo_state(project) == before


# -- the loader built in another module (issue 34) --------------------------------------------------

LOADER_MAIN = """# fake: speed=100 noise=0.01 modules=data fast_if=num_workers=
import torch

import data
import engine


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = data.build_loader(16)
    for epoch in range(2):
        engine.train_one_epoch(model, loader, optimizer)


if __name__ == "__main__":
    main()
"""
LOADER_DATA = """import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.003)  # decoding, augmentation: the work workers would take off the step
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), int(i % 2)


def build_loader(batch_size):
    return DataLoader(Slow(), batch_size=batch_size, shuffle=False)
"""
LOADER_ENGINE = """import torch


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_cli_apply_commits_the_workers_fix_of_the_module_that_builds_the_loader(tmp_path, monkeypatch) -> None:
    """`gpuperf-rewrite main.py --apply`: data.py has no `__main__` guard of its own, but main.py,
    the script the runs start from, keeps its work under one: data.py gets GP201 (and GP203) and
    the commit holds data.py with its note."""
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli
    from gpuperf_rewrite.validate.judge import abtest

    repo = git_repo(tmp_path, {"main.py": LOADER_MAIN, "data.py": LOADER_DATA, "engine.py": LOADER_ENGINE})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(3))
    r = CliRunner().invoke(cli, ["main.py", "--apply", "--select", "GP201,GP202,GP203", "--runs", "6",
                                 "--steps", "3", "--warmup", "1", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "committed", doc
    assert {f["path"]: f["rules_applied"] for f in doc["files"] if f["rules_applied"]} == {"data.py": ["GP201", "GP203"]}
    assert list(repo.head.commit.stats.files) == ["data.py"]
    text = (tmp_path / "data.py").read_text()
    assert "num_workers=min(8, os.cpu_count() or 1)" in text and "persistent_workers=" in text
    rec = _note(repo)
    assert rec["script"] == "main.py" and rec["files"] == [{"path": "data.py", "rules": ["GP201", "GP203"]}]


def test_apply_leaves_the_loader_module_alone_when_the_entry_does_its_work_at_import_time(tmp_path, monkeypatch) -> None:
    """The twin: main.py runs its loop at import time (no guard), so a spawned worker would
    re-import it and start the loop again: data.py's GP201 has no fix and nothing is tried."""
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli
    from gpuperf_rewrite.validate.judge import abtest

    main = LOADER_MAIN.replace('if __name__ == "__main__":\n    main()', "main()")
    repo = git_repo(tmp_path, {"main.py": main, "data.py": LOADER_DATA, "engine.py": LOADER_ENGINE})
    head = repo.head.commit.hexsha
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(3))
    r = CliRunner().invoke(cli, ["main.py", "--apply", "--select", "GP201", "--runs", "6", "--steps", "3",
                                 "--warmup", "1"])
    assert r.exit_code == 0 and "main.py: no fixes to apply" in r.output, r.output
    assert repo.head.commit.hexsha == head and (tmp_path / "data.py").read_text() == LOADER_DATA


@pytest.mark.slow
@pytest.mark.timing
def test_real_runs_commit_the_loader_module_s_workers_fix(tmp_path) -> None:
    """Real runs under the shim on a tiny CPU project: only data.py's loader fix can make B
    faster (each item sleeps; workers load them in parallel), and it lands in the commit with its note."""
    pytest.importorskip("torch")
    from gpuperf_rewrite.lint.api import load_settings
    from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply

    main = LOADER_MAIN.replace("for epoch in range(2)", "for epoch in range(1000)")
    repo = git_repo(tmp_path, {"main.py": main, "data.py": LOADER_DATA, "engine.py": LOADER_ENGINE})
    out: list[str] = []
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        settings = load_settings(select=("GP201", "GP203"))
        rc = run_apply("main.py", settings=settings, options=ApplyOptions(), echo=lambda m="", **k: out.append(str(m)),
                       config=ABConfig(runs=3, max_runs=3, steps=12, warmup=4, timeout=300, alpha=0.2,
                                       early_stop=False, bootstrap_resamples=300))
    finally:
        os.chdir(cwd)
    assert rc == 0, "\n".join(out)
    assert "data.py" in repo.head.commit.stats.files and "num_workers=" in (tmp_path / "data.py").read_text()
    rec = _note(repo)
    assert rec["ab"]["verdict"] == "faster" and rec["ab"]["loss_check"]["status"] == "passed"


def test_apply_does_not_rewrite_the_loader_module_another_unguarded_script_runs(tmp_path, monkeypatch) -> None:
    """evaluate.py runs data.py's loader at import time: the workers fix that is safe through
    main.py would break it under spawn, so data.py is left alone and the reason names evaluate.py."""
    from click.testing import CliRunner

    from gpuperf_rewrite.cli import cli
    from gpuperf_rewrite.validate.judge import abtest

    evaluate = "import data\n\nfor x, y in data.build_loader(8):\n    print(x.shape)\n"
    repo = git_repo(tmp_path, {"main.py": LOADER_MAIN, "data.py": LOADER_DATA, "engine.py": LOADER_ENGINE,
                               "evaluate.py": evaluate})
    head = repo.head.commit.hexsha
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(abtest, "default_runner", lambda: FakeRunner(3))
    r = CliRunner().invoke(cli, ["main.py", "--apply", "--select", "GP201", "--runs", "6", "--steps", "3",
                                 "--warmup", "1"])
    assert "data.py: has fixes (GP201) that differ when evaluate.py imports it" in r.output, r.output
    assert repo.head.commit.hexsha == head and (tmp_path / "data.py").read_text() == LOADER_DATA
