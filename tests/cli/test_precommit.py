"""The pre-commit hooks, end to end with the real ``pre-commit`` from PyPI: ``pre-commit run``
with the README's config builds the hook's virtualenv from this checkout (lint dependencies only,
never torch) and runs it in a throwaway git repository holding a slow training script."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from tests.helpers.paths import ROOT

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]

SLOW = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print("loss", loss.item())
""")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                       reason="needs git and a git checkout of this repository"),
]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_hook_definitions_are_what_the_readme_promises():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"gpuperf-lint", "gpuperf-fix"}
    for h in hooks.values():
        assert h["language"] == "python" and h["types"] == ["python"]
        assert h.get("pass_filenames", True) is True and "additional_dependencies" not in h
    assert "--fix-only" in hooks["gpuperf-fix"]["entry"] and "--fix" not in hooks["gpuperf-lint"]["entry"]


def _readme_configs() -> list[dict]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Integrations: pre-commit"):]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)
            if "repos:" in block]


def test_readme_snippet_pins_the_release_tag_of_this_version():
    """The snippet's ``rev`` is ``v`` + the package version, and where the clone has release tags
    (``git tag -l 'v*'``) that tag is one of them."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    remote = [repo for config in _readme_configs() for repo in config["repos"] if repo["repo"] != "local"]
    assert remote and {repo["rev"] for repo in remote} == {f"v{version}"}
    tags = subprocess.run(["git", "tag", "-l", "v*"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not tags or f"v{version}" in tags, f"README pins v{version}; the repository's tags are {tags}"


def test_readme_local_hooks_match_the_published_ones():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    local = [h for config in _readme_configs() for repo in config["repos"] if repo["repo"] == "local"
             for h in repo["hooks"]]
    assert {h["id"] for h in local} == set(hooks)
    for h in local:
        assert h["entry"] == hooks[h["id"]]["entry"] and h["types"] == hooks[h["id"]]["types"]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A git snapshot of this checkout's working tree (tracked and new, not ignored files), so
    the test exercises uncommitted work too: ``try-repo`` on a dirty checkout would only carry
    changes to tracked files."""
    files = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    dest = tmp_path_factory.mktemp("hookrepo")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() and not rel.startswith(("tests/", "fixtures/", "docs/", "bench")):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "snapshot")
    return dest


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path) -> Path:
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text(SLOW)
    # The repository's own config: GP201 is ignored here, so only GP101 and GP202 remain.
    (repo / "pyproject.toml").write_text('[tool.gpuperf]\nselect = ["GP101", "GP201", "GP202"]\nignore = ["GP201"]\nexclude = ["vendor/"]\n')
    (repo / "vendor").mkdir()
    (repo / "vendor" / "old_train.py").write_text(SLOW)
    _git(repo, "add", "-A")
    return repo


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    env.pop("VIRTUAL_ENV", None)
    return env


def _run(hook: str, repo: Path, hook_repo: Path, home: Path, *files: str) -> subprocess.CompletedProcess:
    """``pre-commit run`` with the README's ``.pre-commit-config.yaml`` snippet pointing at the
    snapshot (environment cached in ``home`` across calls)."""
    rev = _git(hook_repo, "rev-parse", "HEAD").strip()
    config = {"repos": [{"repo": str(hook_repo), "rev": rev,
                         "hooks": [{"id": "gpuperf-fix"}, {"id": "gpuperf-lint"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run([*PRE_COMMIT, "run", hook, "--verbose", "--files", *files],
                          cwd=repo, env=_env(home), capture_output=True, text=True, timeout=600)


def test_hooks_fail_with_the_expected_codes_then_pass_once_fixed(user_repo, hook_repo, pre_commit_home):
    # One hook environment for the whole test (``try-repo`` would build a second, identical one
    # from the same .pre-commit-hooks.yaml): the repository's config and excludes apply.
    res = _run("gpuperf-lint", user_repo, hook_repo, pre_commit_home, "train.py", "vendor/old_train.py")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "train.py:13:19: GP101" in out
    assert "train.py:7:10: GP202" in out
    assert "GP201" not in out  # ignored by the repository's [tool.gpuperf]
    assert "vendor/old_train.py:" not in out  # excluded by its config, though passed in
    assert "Failed" in out

    # The fix hook applies the safe fix (GP202) and fails because it changed the file; it reports
    # only what it fixed, so the finding left (GP101, unsafe) is printed by gpuperf-lint alone.
    res = _run("gpuperf-fix", user_repo, hook_repo, pre_commit_home, "train.py")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "files were modified by this hook" in out
    assert "Fixed 1 error." in out and "GP101" not in out and "GP202" not in out
    fixed = (user_repo / "train.py").read_text()
    assert "pin_memory=torch.cuda.is_available()" in fixed
    assert "loss.item()" in fixed  # the unsafe GP101 fix is not the hook's to apply

    # The author rate-limits the logging and suppresses one deliberate line with noqa.
    fixed = fixed.replace('    print("loss", loss.item())\n',
                          '    if step % 100 == 0:\n        print("loss", loss.item())\n'
                          '    last = float(loss)  # noqa: GP101\n')
    (user_repo / "train.py").write_text(fixed)
    for hook in ("gpuperf-lint", "gpuperf-fix"):
        res = _run(hook, user_repo, hook_repo, pre_commit_home, "train.py", "vendor/old_train.py")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Passed" in res.stdout
    assert (user_repo / "train.py").read_text() == fixed

    # Installing the hook pulled in the lint dependencies only.
    pythons = sorted(pre_commit_home.glob("repo*/py_env-*/bin/python"))
    assert len(pythons) == 1, pythons
    probe = ("import importlib.util as u; "
             "print([m for m in ('torch', 'scipy', 'github', 'libcst', 'click', 'yaml') if u.find_spec(m)])")
    found = subprocess.run([str(pythons[0]), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "['libcst', 'click', 'yaml']"
