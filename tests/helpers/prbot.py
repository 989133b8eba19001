"""A git repository with a pull request for the PR bot's tests: main has a clean train.py, the
``feature`` branch a slow training loop (and deletes a helper file)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

TOKEN = "ghs_TESTTOKEN0123456789abcdef"

BASE_TRAIN = textwrap.dedent("""\
    import torch

    print("hello")
""")
# Guarded (GP201 adds workers only to scripts whose loop runs under `__main__`); the guard takes
# the place of a blank line, so the findings keep their line numbers.
SLOW_TRAIN = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    if __name__ == "__main__":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(4, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
        total = 0.0
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print("mean loss", total / len(loader))
""")
GP202_LINE = ('    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, '
              'pin_memory=torch.cuda.is_available())')


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str | None], msg: str) -> str:
    for name, text in files.items():
        if text is None:
            (repo / name).unlink()
        else:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", msg)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp_path: Path, monkeypatch: Any) -> Path:
    """main: a clean train.py, a helper that the PR deletes; feature (checked out, the current
    directory): the slow train.py. No GITHUB_* variables set."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    # Pin the rules: these tests are about the bot, not about which rules exist.
    commit(r, {"train.py": BASE_TRAIN, "helper.py": "import torch\nprint(torch.ones(1).item())\n",
               ".gpuperf.yaml": "select: [GP101, GP201, GP202]\n"}, "base")
    git(r, "checkout", "-qb", "feature")
    commit(r, {"train.py": SLOW_TRAIN, "helper.py": None}, "slow training loop")
    monkeypatch.chdir(r)
    for var in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_BASE_REF", "GITHUB_API_URL"):
        monkeypatch.delenv(var, raising=False)
    return r


def actions_env(monkeypatch: Any, repo: Path, fake: Any) -> None:
    """What a pull_request workflow run provides, pointing at the fake GitHub ``fake``."""
    event = repo.parent / "event.json"
    event.write_text(json.dumps({"number": fake.number, "pull_request": {
        "number": fake.number, "head": {"sha": fake.pr["head"]}, "base": {"sha": fake.pr["base"], "ref": "main"}}}))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_REPOSITORY", fake.repo)
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
