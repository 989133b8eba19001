"""Hostile and odd input: every case gets a clear message and the right exit code, and the other
files of the same run are still checked (and fixed). Runs the CLI in-process (CliRunner) except
where a real process is the point (a worker that segfaults)."""

from __future__ import annotations

import multiprocessing
import os
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.lint import parallel as runner
from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.sourceio import WriteRefused, atomic_write

# GP101 (unsafe fix) and GP202 (safe fix) both fire here; the safe fix adds pin_memory=.
GOOD = b"""import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loader = DataLoader(ds, batch_size=4, num_workers=2)
total = 0.0
for x, y in loader:
    loss = model(x)
    total += loss.item()
print(total)
"""


def run(args: list[str], cwd: Path) -> tuple[int, str, str]:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(cli, ["--isolated", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_bytes(GOOD)
    return tmp_path


def _good_was_processed(out: str, tree: Path, fixed: bool = False) -> None:
    assert "good.py:9:" in out or fixed  # GP101 on the .item() line (9)
    if fixed:
        assert b"pin_memory=" in (tree / "good.py").read_bytes()


# ---- files that are not valid Python --------------------------------------------------------

# Files that could hold a finding (they mention torch) but cannot be parsed. A file that mentions
# nothing any rule looks for is not parsed at all (tests/lint/test_prefilter.py), so its syntax errors
# are Python's and other linters' to report: see test_file_no_rule_can_touch_is_not_parsed.
@pytest.mark.parametrize("name,content,message,line", [
    ("syntax.py", b"import torch\ndef f(:\n    pass\n", "SyntaxError", 2),
    ("nul.py", GOOD + b"x = 1\x00\n", "NUL byte", 11),
    ("deep_parens.py", b"from torch.utils.data import DataLoader\nx = " + b"(" * 5000 + b"1" + b")" * 5000,
     "too many nested parentheses", 2),
    ("deep_lists.py", b"from torch.utils.data import DataLoader\nx = " + b"[" * 190 + b"1" + b"]" * 190,
     "nested", 2),
    ("deep_not.py", b"from torch.utils.data import DataLoader\nx = " + b"not " * 5000 + b"y\n", "nested", 1),
    ("deep_attr.py", b"from torch.utils.data import DataLoader\nx = a" + b".b" * 5000 + b"\n", "nested", 1),
    ("deep_sum.py", b"from torch.utils.data import DataLoader\nx = " + b"+".join([b"a"] * 30000) + b"\n",
     "nested", 1),
    ("bad_cookie.py", b"# -*- coding: klingon -*-\nx = 1\n", "klingon", 1),
    ("bad_utf8.py", b"x = '\xff\xfe'\n", "decode", 1),
])
def test_unparsable_file_is_reported_and_others_still_checked(tree, name, content, message, line):
    (tree / name).write_bytes(content)
    code, out, err = run([".", "--select", "ALL"], tree)  # deep nesting must not crash LibCST
    lines = [ln for ln in out.splitlines() if ln.startswith(name)]
    assert len(lines) == 1, out + err
    assert message in lines[0]
    assert lines[0].startswith(f"{name}:{line}:") or message == "nested"
    assert "E999" in lines[0]
    _good_was_processed(out, tree)
    assert code == 1


def test_only_unparsable_files_exit_2(tmp_path):
    (tmp_path / "a.py").write_bytes(b"import torch\ndef f(:\n")
    (tmp_path / "b.py").write_bytes(b"import torch\nx = 1\x00\n")
    (tmp_path / "c.py").write_bytes(b"# -*- coding: klingon -*-\nx = 1\n")  # undecodable: always reported
    code, out, _ = run([".", "--select", "ALL"], tmp_path)
    assert code == 2
    assert out.count("E999") == 3


def test_file_no_rule_can_touch_is_not_parsed(tree):
    """No torch, framework or training-loop marker: skipped before parsing, so a syntax error
    in it is not ours to report (the run passes), while the other files are still checked."""
    (tree / "util.py").write_bytes(b"def f(:\n    print(int(x))\n")
    code, out, _ = run(["util.py"], tree)
    assert code == 0 and "E999" not in out and "All checks passed!" in out
    code, out, _ = run([".", "--select", "ALL"], tree)
    assert code == 1 and "util.py" not in out
    _good_was_processed(out, tree)


def test_diff_mode_still_reports_unparsable_files(tree):
    (tree / "bad.py").write_bytes(b"import torch\ndef f(:\n")
    code, out, err = run([".", "--diff"], tree)
    assert "+++ b/good.py" in out
    assert "bad.py:2:7: E999 SyntaxError" in err
    assert code == 1


# ---- encodings, line endings, whitespace: kept byte for byte ---------------------------------

def _fix(tree: Path, name: str, data: bytes) -> bytes:
    (tree / name).write_bytes(data)
    code, out, err = run([name, "--fix", "--unsafe-fixes"], tree)
    assert code in (0, 1), out + err
    return (tree / name).read_bytes()


def _unchanged_lines_identical(before: bytes, after: bytes) -> None:
    """Every original line that the fix did not touch is still there with its own ending."""
    import difflib

    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    kept = [a[i:i + n] for i, _, n in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()]
    kept_lines = sum(len(k) for k in kept)
    assert kept_lines >= len(a) - 3  # the fixes touch at most the DataLoader and the .item() lines


def test_crlf_kept(tree):
    src = GOOD.replace(b"\n", b"\r\n")
    out = _fix(tree, "crlf.py", src)
    assert out != src and b"pin_memory=" in out
    assert out.count(b"\n") == out.count(b"\r\n")  # no bare LF introduced
    _unchanged_lines_identical(src, out)


def test_mixed_line_endings_kept_per_line(tree):
    lines = GOOD.split(b"\n")
    src = b"\r\n".join(lines[:4]) + b"\r\n" + b"\n".join(lines[4:])
    out = _fix(tree, "mixed.py", src)
    assert b"pin_memory=" in out
    for original_line in src.splitlines(keepends=True):
        if b"DataLoader(" in original_line or b".item()" in original_line or b"print(" in original_line:
            continue
        assert original_line in out.splitlines(keepends=True), original_line


def test_bom_kept(tree):
    src = b"\xef\xbb\xbf" + GOOD
    out = _fix(tree, "bom.py", src)
    assert out.startswith(b"\xef\xbb\xbf") and not out.startswith(b"\xef\xbb\xbf" * 2)
    assert b"pin_memory=" in out


def test_latin1_file_kept_in_its_encoding(tree):
    src = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + GOOD + b'name = "\xe9t\xe9"\n'
    out = _fix(tree, "latin1.py", src)
    assert b"pin_memory=" in out
    assert b"# caf\xe9\n" in out and b'name = "\xe9t\xe9"\n' in out  # still latin-1, not UTF-8
    with pytest.raises(UnicodeDecodeError):
        out.decode("utf-8")


def test_tabs_kept(tree):
    src = GOOD.replace(b"    ", b"\t")
    out = _fix(tree, "tabs.py", src)
    assert b"pin_memory=" in out
    assert b"\tloss = model(x)\n" in out
    assert b"\n    " not in out


# ---- size and paths --------------------------------------------------------------------------

def test_10mb_file_is_reported_quickly(tree):
    body = GOOD + b"".join(b"data_%d = [%s]\n" % (i, b", ".join([b"1.0"] * 40)) for i in range(60_000))
    assert len(body) > 10 * 2**20
    (tree / "huge.py").write_bytes(body)
    code, out, err = run([".", "--select", "ALL"], tree)
    assert re.search(r"huge\.py:1:1: E902 file is 1\d\.\d MiB, over the 5 MiB limit for analysis", out), out
    _good_was_processed(out, tree)
    assert code == 1


def test_one_long_line_of_imports_is_triaged_in_linear_time(tree):
    """The torch gate reads each logical line once: a 300 KB line of ``import a, `` (no torch
    package) is cleared before parsing in milliseconds. Searching from every ``import`` to the
    end of the line, as a first version did, took minutes here (2.6 s at 30 KB, quadratic)."""
    (tree / "imports.py").write_bytes(b"x = 1; " + b"import a, " * 30_000 + b"b\n")
    code, out, err = run([".", "--select", "ALL"], tree)
    assert "imports.py" not in out
    _good_was_processed(out, tree)
    assert code == 1


def test_large_file_under_the_limit_is_checked(tree):
    body = GOOD + b"".join(b"def f_%d(x):\n    return x + %d\n" % (i, i) for i in range(4_000))
    (tree / "big.py").write_bytes(body)
    code, out, _ = run(["big.py", "--select", "ALL"], tree)
    assert "big.py:9:" in out and code == 1


def test_missing_path_reported_others_checked(tree):
    code, out, _ = run(["good.py", "nope.py", "nodir/"], tree)
    assert "nope.py:1:1: E902 no such file or directory" in out
    assert "nodir/:1:1: E902" in out
    _good_was_processed(out, tree)
    assert code == 1


def test_only_missing_paths_exit_2(tmp_path):
    code, out, _ = run(["nope.py"], tmp_path)
    assert code == 2 and "E902" in out


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_real_permissions(tree):
    bad = tree / "secret.py"
    bad.write_bytes(GOOD)
    bad.chmod(0)
    try:
        code, out, _ = run([".", "--select", "ALL"], tree)
    finally:
        bad.chmod(0o644)
    assert "secret.py:1:1: E902 cannot read file: Permission denied" in out
    _good_was_processed(out, tree)
    assert code == 1


def test_unreadable_file(tree, monkeypatch):
    # Simulated so that it also runs as root (CI containers), where chmod 000 reads fine.
    (tree / "secret.py").write_bytes(GOOD)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    code, out, _ = run([".", "--select", "ALL"], tree)
    assert "secret.py:1:1: E902 cannot read file: Permission denied" in out
    _good_was_processed(out, tree)
    assert code == 1


def test_file_deleted_during_the_run(tree, monkeypatch):
    (tree / "gone.py").write_bytes(GOOD)
    from gpuperf_rewrite.lint import discovery as files

    real = files.discover

    def discover_then_delete(*args, **kwargs):
        found = real(*args, **kwargs)
        (tree / "gone.py").unlink()  # between discovery and reading
        return found

    monkeypatch.setattr(files, "discover", discover_then_delete)
    code, out, _ = run([".", "--select", "ALL"], tree)
    assert "gone.py:1:1: E902 cannot read file: No such file or directory" in out
    _good_was_processed(out, tree)
    assert code == 1


def test_file_deleted_before_write_is_not_recreated(tree, monkeypatch):
    (tree / "gone.py").write_bytes(GOOD)
    from gpuperf_rewrite.lint import sourceio as fileio

    real = fileio.atomic_write

    def delete_then_write(path, data, **kw):
        if Path(path).name == "gone.py":
            Path(path).unlink()
        return real(path, data, **kw)

    monkeypatch.setattr(fileio, "atomic_write", delete_then_write)
    code, _, err = run([".", "--fix"], tree)
    assert "gone.py: file disappeared before it could be written" in err
    assert not (tree / "gone.py").exists()
    assert b"pin_memory=" in (tree / "good.py").read_bytes()
    assert code == 2


def test_read_only_file_with_fix_is_untouched(tree):
    ro = tree / "ro.py"
    ro.write_bytes(GOOD)
    ro.chmod(0o444)
    try:
        code, out, err = run([".", "--fix"], tree)
        assert re.search(r"ro\.py: file is read-only, not modified \(\d+ fix(es)? not applied\)", err), err
        assert ro.read_bytes() == GOOD
        assert stat.S_IMODE(ro.stat().st_mode) == 0o444
        assert b"pin_memory=" in (tree / "good.py").read_bytes()  # the other file is fixed
        assert code == 2
        assert not list(tree.glob(".*gpuperf-tmp"))
    finally:
        ro.chmod(0o644)


def test_file_edited_during_the_run_is_not_overwritten(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(b"edited\n")
    with pytest.raises(WriteRefused, match="changed on disk"):
        atomic_write(f, b"new\n", expected=b"old\n")
    assert f.read_bytes() == b"edited\n"


def test_atomic_write_keeps_mode_and_leaves_no_temp(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(b"old\n")
    f.chmod(0o751)
    atomic_write(f, b"new\n", expected=b"old\n")
    assert f.read_bytes() == b"new\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_atomic_write_through_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.py"
    target.write_bytes(b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    atomic_write(link, b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"new\n"


def test_symlinks_not_followed_out_of_the_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "escaped.py").write_bytes(GOOD)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "good.py").write_bytes(GOOD)
    (proj / "linked_file.py").symlink_to(outside / "escaped.py")
    (proj / "linked_dir").symlink_to(outside, target_is_directory=True)
    (proj / "inside_link.py").symlink_to(proj / "good.py")  # same file: checked once
    (proj / "loop").symlink_to(proj, target_is_directory=True)
    code, out, err = run([".", "--fix"], proj)
    assert "linked_file.py: symbolic link out of the tree, not followed" in err
    assert "linked_dir: symbolic link to a directory, not followed" in err
    assert (outside / "escaped.py").read_bytes() == GOOD  # never written through a link
    assert out.count("GP101") == 1
    assert (proj / "inside_link.py").is_symlink()
    assert code == 1


def test_follow_symlinks_survives_a_loop(tmp_path):
    (tmp_path / "good.py").write_bytes(GOOD)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "loop").symlink_to(tmp_path, target_is_directory=True)
    code, out, err = run([".", "--follow-symlinks"], tmp_path)
    assert "symbolic link loop" in err
    assert out.count("good.py:9:") == 1
    assert code == 1


# ---- invalid configuration names the line ----------------------------------------------------

@pytest.mark.parametrize("name,text,expected", [
    (".gpuperf.yaml", "exclude: [a\nselect: [GP101]\n", "invalid YAML at line 2"),
    (".gpuperf.yaml", "exclude: [a]\nselect: 5\n", "line 2: 'select' must be a list of strings"),
    (".gpuperf.yaml", "ignore: [GP101]\nrules:\n  GP201: {max-workers: many}\n",
     "line 2: 'rules.GP201.max-workers' must be int"),
    (".gpuperf.yaml", "- just\n- a list\n", "expected a table of settings"),
    ("pyproject.toml", "[tool.gpuperf]\nselect = [\"GP101\"\nignore = []\n", "invalid TOML: "),
    ("pyproject.toml", "[tool.gpuperf]\nignore = [\"GP101\"]\nselect = \"XX9\"\n", "line 3: 'select'"),
    ("pyproject.toml", "[tool.gpuperf]\nselekt = [\"GP101\"]\n", "unknown key(s) 'selekt'"),
])
def test_invalid_config_names_the_line(tree, name, text, expected):
    (tree / name).write_text(text)
    old = os.getcwd()
    os.chdir(tree)
    try:
        res = CliRunner().invoke(cli, ["good.py"], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 2
    assert expected in res.stderr, res.stderr
    assert name in res.stderr
    if "TOML" in expected:
        assert "line 3" in res.stderr


# ---- a worker that dies must not take the run with it ----------------------------------------

def _crashing_check(job: runner.Job):
    if job.path.endswith("crash.py"):
        import faulthandler

        faulthandler.disable()  # no traceback dump in the test output
        os.kill(os.getpid(), 11)  # what a stack overflow in the native parser looks like
    return runner.check_job(job)


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the test's crashing function reaches workers by fork")
def test_worker_crash_costs_one_file_not_the_run(tmp_path):
    paths = []
    for i in range(40):
        p = tmp_path / ("crash.py" if i == 17 else f"f{i:02d}.py")
        p.write_bytes(GOOD)
        paths.append(p)
    jobs = [runner.Job(p.name, str(p), RuleSet(("GP101",)), "none", False) for p in paths]
    results = list(runner.run_jobs(jobs, 2, check=_crashing_check))
    assert [r.path for r in results] == [p.name for p in paths]  # all, in order
    crashed = [r for r in results if r.error]
    assert [r.path for r in crashed] == ["crash.py"]
    assert crashed[0].diagnostics[0].code == "E001"
    assert "crashed its worker process" in crashed[0].diagnostics[0].message
    assert all(r.diagnostics and r.diagnostics[0].code == "GP101" for r in results if not r.error)


def test_rule_crash_is_reported_for_that_file(monkeypatch):
    from gpuperf_rewrite.lint.registry import all_rules

    rule = all_rules()["GP101"]

    def boom(self, ctx):
        raise ValueError("rule bug")
        yield  # pragma: no cover

    monkeypatch.setattr(rule, "check", boom)
    res = check_source(GOOD, "x.py", RuleSet(("GP101", "GP202")), "safe")
    assert res.error and res.diagnostics[0].code == "E001"
    assert "GP101: ValueError: rule bug" in res.diagnostics[0].message
