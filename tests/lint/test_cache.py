"""The lint cache: a second run over an unchanged tree parses nothing and reports the same; any
change to a file's bytes or to the settings in force for it is a miss; a damaged entry is never
trusted; concurrent runs sharing one cache stay correct."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint import cache as cache_mod
from gpuperf_rewrite.lint import engine
from gpuperf_rewrite.lint.cache import ENV_VAR, Cache
from gpuperf_rewrite.lint.diagnostics import Diagnostic

TRAIN = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(ds, batch_size=8)
    for x, y in loader:
        loss = model(x.to(device))
        loss.backward()
        opt.step()
        print(loss.item())
""")
MODEL = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
BROKEN = "import torch\ndef f(:\n"
UTIL = "def add(a, b):\n    return a + b\n"  # nothing to find: never parsed, never cached
ANALYSED = ["model.py", "train0.py", "train1.py", "train2.py"]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_VAR, raising=False)
    for i in range(3):
        (tmp_path / f"train{i}.py").write_text(TRAIN.replace("batch_size=8", f"batch_size={8 + i}"))
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "util.py").write_text(UTIL)
    return tmp_path


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Paths LibCST parsed during the test (in this process: runs use -j 1)."""
    seen: list[str] = []
    real = engine.parse

    def counting(data, path):
        seen.append(path)
        return real(data, path)

    monkeypatch.setattr(engine, "parse", counting)
    # A parse this process kept (for the files importing a module, issue 27) would stand in for
    # one here: every analysed file parses.
    monkeypatch.setattr(engine, "parsed_before", lambda fs_path, data: None)
    return seen


def lint(tree: Path, *args: str) -> tuple[int, str]:
    old = os.getcwd()
    os.chdir(tree)
    try:
        res = CliRunner().invoke(cli, ["--isolated", "-j", "1", "--output-format", "json", ".", *args],
                                 catch_exceptions=False)
    finally:
        os.chdir(old)
    return res.exit_code, res.stdout


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*/*/*.json"))


def test_second_run_parses_nothing_and_reports_the_same(tree, parses):
    code1, out1 = lint(tree)
    # Not util.py (nothing to find); broken.py stops at the syntax gate, before LibCST, and its
    # E999 is cached like any result.
    assert sorted(parses) == ANALYSED
    assert len(entries(tree / ".gpuperf_cache")) == 5
    parses.clear()
    code2, out2 = lint(tree)
    assert parses == []
    assert (code2, json.loads(out2)) == (code1, json.loads(out1))
    assert {d["code"] for d in json.loads(out2)} >= {"E999", "GP101", "GP202"}
    assert [d for d in json.loads(out2) if d["code"] == "E999"][0]["path"] == "broken.py"


def test_changed_file_is_a_miss_and_only_it_is_parsed(tree, parses):
    lint(tree)
    parses.clear()
    (tree / "train1.py").write_text(TRAIN.replace("print(loss.item())", "pass"))
    _, out = lint(tree)
    assert parses == ["train1.py"]
    assert not [d for d in json.loads(out) if d["path"] == "train1.py" and d["code"] == "GP101"]


@pytest.mark.parametrize("change,parsed", [
    (["--select", "GP101"], ["train0.py", "train1.py", "train2.py"]),  # only what GP101 can fire on
    (["--extend-select", "GP405"], ANALYSED),
    (["--ignore", "GP202"], ANALYSED),
])
def test_changed_selection_is_a_miss(tree, parses, change, parsed):
    lint(tree)
    parses.clear()
    _, out = lint(tree, *change)
    assert sorted(parses) == parsed
    if change[0] == "--select":
        assert {d["code"] for d in json.loads(out)} == {"GP101"}
    parses.clear()
    lint(tree, *change)  # and that selection is cached in turn
    assert parses == []


def test_changed_rule_options_and_per_file_ignores_are_misses(tree, parses):
    old = os.getcwd()
    os.chdir(tree)
    try:
        def run(config: str) -> list[dict]:
            (tree / "lint.yaml").write_text(config)
            res = CliRunner().invoke(cli, ["-j", "1", "--output-format", "json", "--config", "lint.yaml", "."],
                                     catch_exceptions=False)
            return json.loads(res.stdout)

        run("select: [GP101, GP201]\n")
        parses.clear()
        run("select: [GP101, GP201]\nrules: {GP201: {max-workers: 2}}\n")
        assert sorted(parses) == ["train0.py", "train1.py", "train2.py"]
        parses.clear()
        found = run("select: [GP101, GP201]\nrules: {GP201: {max-workers: 2}}\n"
                    "per-file-ignores: {train0.py: [GP201]}\n")
        assert parses == ["train0.py"]
        assert {d["code"] for d in found if d["path"] == "train0.py"} == {"GP101"}
    finally:
        os.chdir(old)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "edited", "other-key", "empty"])
def test_damaged_entry_is_ignored_and_rewritten(tree, parses, damage):
    _, before = lint(tree)
    cache = tree / ".gpuperf_cache"
    victim = next(p for p in entries(cache) if "GP101" in p.read_text())
    doc = json.loads(victim.read_text())
    if damage == "truncate":
        victim.write_text(victim.read_text()[: len(victim.read_text()) // 2])
    elif damage == "garbage":
        victim.write_bytes(os.urandom(64))
    elif damage == "edited":  # still valid JSON with the right key: the checksum catches it
        doc["diagnostics"] = []
        victim.write_text(json.dumps(doc))
    elif damage == "other-key":
        doc["key"] = "0" * 64
        victim.write_text(json.dumps(doc))
    else:
        victim.write_text("")
    parses.clear()
    _, after = lint(tree)
    assert len(parses) == 1  # the damaged entry's file, analysed again
    assert json.loads(after) == json.loads(before)
    assert json.loads(victim.read_text())["key"] != "0" * 64  # rewritten whole
    parses.clear()
    lint(tree)
    assert parses == []


def test_no_cache_cache_dir_and_environment(tree, parses, monkeypatch, tmp_path_factory):
    lint(tree, "--no-cache")
    assert not (tree / ".gpuperf_cache").exists()
    elsewhere = tmp_path_factory.mktemp("cache-opt")
    lint(tree, "--cache-dir", str(elsewhere))
    assert entries(elsewhere) and not (tree / ".gpuperf_cache").exists()
    from_env = tmp_path_factory.mktemp("cache-env")
    monkeypatch.setenv(ENV_VAR, str(from_env))
    parses.clear()
    lint(tree)
    assert entries(from_env) and parses  # a new cache: everything analysed once
    parses.clear()
    lint(tree, "--cache-dir", str(elsewhere))  # the option wins over the environment
    assert parses == []
    parses.clear()
    lint(tree, "--no-cache")
    assert len(parses) == 4


def test_cache_is_under_the_project_root_and_ignored_by_git(tree, parses):
    (tree / "pyproject.toml").write_text("[tool.gpuperf]\nselect = ['GP1']\n")
    (tree / "sub").mkdir()
    (tree / "sub" / "t.py").write_text(TRAIN)
    old = os.getcwd()
    os.chdir(tree / "sub")
    try:
        CliRunner().invoke(cli, ["-j", "1", "t.py"], catch_exceptions=False)
    finally:
        os.chdir(old)
    cache = tree / ".gpuperf_cache"
    assert entries(cache) and not (tree / "sub" / ".gpuperf_cache").exists()
    assert (cache / ".gitignore").read_text() == "*\n"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_fix_run_reads_the_cache_but_never_writes_it(tree, parses):
    code, _ = lint(tree, "--fix")
    assert not (tree / ".gpuperf_cache").exists()  # a fix run alone creates no cache
    lint(tree)  # lint: fills the cache (the files are fixed now)
    parses.clear()
    (tree / "model.py").write_text(MODEL + "\n# edited\n")
    lint(tree, "--fix")
    # model.py changed (a miss); the others' cached results hold no fix --fix would apply
    assert parses == ["model.py"]
    parses.clear()
    (tree / "train0.py").write_text(TRAIN)  # a safe fix again (GP202): must really be fixed
    code, _ = lint(tree, "--fix")
    assert "train0.py" in parses and "pin_memory=" in (tree / "train0.py").read_text()


def test_unwritable_cache_warns_once_and_the_run_goes_on(tree, tmp_path_factory):
    blocker = tmp_path_factory.mktemp("ro") / "file"
    blocker.write_text("not a directory")
    old = os.getcwd()
    os.chdir(tree)
    try:
        res = CliRunner().invoke(cli, ["--isolated", "-j", "1", ".", "--cache-dir", str(blocker / "c")],
                                 catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 1 and "GP101" in res.stdout
    assert res.stderr.count("cache disabled") == 1


def test_other_tool_fingerprint_is_a_miss(tmp_path):
    diag = Diagnostic("a.py", 1, 1, 1, 2, "GP101", "sync-in-loop", "m", "warning", None)
    ours, _ = Cache.open(tmp_path)
    key = ours.key("a.py", b"x", Cache.salt(["GP101"], {}))
    ours.store(key, [diag])
    assert ours.load(key) == [diag]
    assert Cache(tmp_path, "another-version").load(key) is None
    assert ours.load(ours.key("a.py", b"x", Cache.salt(["GP101"], {"GP101": {"k": 1}}))) is None
    assert ours.load(ours.key("a.py", b"x", Cache.salt(["GP101", "GP102"], {}))) is None
    assert ours.load(ours.key("b.py", b"x", Cache.salt(["GP101"], {}))) is None
    assert ours.load(ours.key("a.py", b"y", Cache.salt(["GP101"], {}))) is None


# ---- concurrency ---------------------------------------------------------------------------------
def _hammer(directory: str, fingerprint: str, worker: int, rounds: int, queue) -> None:
    cache = Cache(Path(directory), fingerprint)
    bad = 0
    for r in range(rounds):
        for k in range(8):
            key = cache.key("f.py", f"content {k}".encode(), Cache.salt(["GP101"], {}))
            want = [Diagnostic("f.py", k + 1, 1, k + 1, 2, "GP101", "sync-in-loop", "m" * (k * 500), "warning", None)]
            got = cache.load(key)
            if got is not None and got != want:
                bad += 1  # a reader saw a half-written or foreign entry
            if (r + worker + k) % 2 == 0:
                cache.store(key, want)
    queue.put(bad)


def test_concurrent_writers_and_readers_never_see_a_partial_entry(tmp_path):
    cache, _ = Cache.open(tmp_path)
    ctx = multiprocessing.get_context()
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), cache.fingerprint, w, 60, queue)) for w in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert results == [0, 0, 0, 0]
    assert all(cache.load(cache.key("f.py", f"content {k}".encode(), Cache.salt(["GP101"], {}))) for k in range(8))
    assert not list(tmp_path.rglob("*.tmp"))  # every temporary file was renamed into place


def test_entries_are_written_as_mkstemp_would_without_importing_tempfile(tmp_path):
    """Private (0600), exclusive, no temporary file left (tests/cli/test_startup_imports.py
    checks that a lint run no longer imports tempfile for it)."""
    cache, _ = Cache.open(tmp_path)
    key = cache.key("f.py", b"x", Cache.salt(["GP101"], {}))
    cache.store(key, [])
    entries = [p for p in (tmp_path / cache.fingerprint).rglob("*") if p.is_file()]
    assert entries and all(p.stat().st_mode & 0o777 == 0o600 for p in entries)
    assert not [p for p in tmp_path.rglob(".*") if p.name.startswith(".probe-") or p.suffix == ".tmp"]
    fd, name = cache_mod._new_file(tmp_path, ".x-")
    os.close(fd)
    with pytest.raises(FileExistsError):  # exclusive creation: an existing name is never reused
        os.close(os.open(name, cache_mod._NEW_FILE_FLAGS, 0o600))


@pytest.mark.slow
def test_two_cli_runs_at_once_share_one_cache(tree):
    for i in range(3, 40):  # above the parallel threshold: worker processes write entries too
        (tree / f"train{i}.py").write_text(TRAIN.replace("batch_size=8", f"batch_size={8 + i}"))
    expected = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", "--isolated", "--no-cache",
                               "--output-format", "json", "."], cwd=tree, capture_output=True, text=True)
    cmd = [sys.executable, "-m", "gpuperf_rewrite", "--isolated", "--output-format", "json", "-j", "2", "."]
    procs = [subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == expected.returncode, err
        assert json.loads(out) == json.loads(expected.stdout)
    cache, _ = Cache.open(tree / ".gpuperf_cache", create=False)
    assert cache is not None
    stored = entries(tree / ".gpuperf_cache")
    assert len(stored) == 42  # 40 training scripts, model.py, broken.py (util.py is never parsed)
    assert all(json.loads(p.read_text())["key"] for p in stored)
    third = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    assert json.loads(third.stdout) == json.loads(expected.stdout)


def test_second_run_with_a_worker_pool_parses_nothing(tree, monkeypatch):
    from gpuperf_rewrite.lint.api import lint_paths, load_settings
    from gpuperf_rewrite.lint.discovery import discover

    for i in range(3, 24):  # enough candidates for a process pool
        (tree / f"train{i}.py").write_text(TRAIN.replace("batch_size=8", f"batch_size={8 + i}"))
    monkeypatch.chdir(tree)
    settings = load_settings(isolated=True)
    found = discover(["."], settings.root, settings.exclude)
    first = lint_paths(found, settings, jobs=2, cache_dir=tree / ".gpuperf_cache")
    second = lint_paths(found, settings, jobs=2, cache_dir=tree / ".gpuperf_cache")
    assert first.parsed == 26 and first.cached == 0  # 24 scripts, model.py, broken.py; not util.py
    assert second.parsed == 0 and second.cached == 26
    assert second.diagnostics == first.diagnostics
