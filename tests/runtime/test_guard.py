"""The shim's write guard (runtime/process/guard.py): torch.save through a mirror link gets a private copy,
a write into the user's files ends the run with an error naming the path, logged for the tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gpuperf_rewrite.runtime.process.guard import GUARD_ENV
from gpuperf_rewrite.validate.run.profiling import run_profile

SCRIPT = """import torch
from pathlib import Path
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    torch.save({{"step": step}}, "ckpt.pt")  # a mirror link to the user's checkpoint: private copy
    torch.jit.save(torch.jit.script(torch.nn.Identity()), "model.jit")
print("copy:", not Path("ckpt.pt").is_symlink(), torch.load("ckpt.pt"))
try:
    torch.save({{}}, {target!r})  # the user's file, by absolute path: refused
except Exception:
    print("swallowed")  # never reached: the refusal is not an Exception
print("went on")
"""


def test_torch_save_gets_a_private_copy_and_a_write_into_the_checkout_ends_the_run(tmp_path) -> None:
    user, scratch = tmp_path / "checkout", tmp_path / "scratch"
    user.mkdir()
    scratch.mkdir()
    torch.save({"step": "the user's"}, user / "ckpt.pt")
    (user / "model.jit").write_bytes(b"the user's model")
    before = {p.name: p.read_bytes() for p in user.iterdir()}
    for name in before:
        (scratch / name).symlink_to(user / name)
    (scratch / "train.py").write_text(SCRIPT.format(target=str(user / "other.pt")))
    log = tmp_path / "guard.jsonl"
    env = {GUARD_ENV: json.dumps({"scratch": str(scratch), "protect": [str(user)], "log": str(log)})}
    doc = run_profile(scratch / "train.py", steps=100, warmup=0, timeout=120, cwd=scratch,
                      env={**__import__("os").environ, **env})
    assert "copy: True {'step': 2}" in doc["stdout_tail"], doc["stderr_tail"]
    assert "swallowed" not in doc["stdout_tail"] and "went on" not in doc["stdout_tail"]
    assert doc["status"] == "crashed" and "WriteRefused" in doc["error"] and "other.pt" in doc["error"]
    assert {p.name: p.read_bytes() for p in user.iterdir()} == before  # nothing added or changed
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["real"] == str(user / "other.pt") and entry["event"] == "torch.save"


def test_profile_help_says_the_writes_are_the_users_own() -> None:
    """`profile` runs the script as `python train.py` would (no guard): its help says so."""
    from click.testing import CliRunner

    from gpuperf_rewrite.cli.profile import profile

    text = " ".join(CliRunner().invoke(profile, ["--help"]).output.split())
    assert "as `python SCRIPT` would" in text and "lands in your files, as its own doing" in text


@pytest.fixture(autouse=True)
def _no_inherited_guard(monkeypatch) -> None:
    monkeypatch.delenv(GUARD_ENV, raising=False)
