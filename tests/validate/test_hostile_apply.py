"""Issue 20 item 4, --apply: the same input gets the same verdict as `check` (E999, exit 2), and a
configuration that cannot decide is refused before the profile run (fake runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.validate.judge import abtest  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from gpuperf_rewrite.validate.apply import ApplyError  # noqa: E402
from tests.helpers.abfakes import FakeRunner, apply_with_fakes, git_repo  # noqa: E402

PY2 = b"import torch\nmodel = torch.nn.Linear(2, 2)\nprint 'step', 1\n"
BINARY = b"\x00\xff\xfeimport torch\x00\x01\x02" * 10


@pytest.mark.parametrize("data", [PY2, BINARY], ids=["python2", "binary"])
@pytest.mark.parametrize("extra", [["--no-commit"], []], ids=["no-commit", "in-git"])
def test_apply_on_an_uncheckable_file_says_e999_and_exits_2_like_check(tmp_path, monkeypatch, data, extra) -> None:
    monkeypatch.chdir(tmp_path)
    runner = FakeRunner()
    monkeypatch.setattr(abtest, "default_runner", lambda: runner)
    git_repo(tmp_path, {"README.md": "x\n"})
    script = tmp_path / "train.py"
    script.write_bytes(data)
    if not extra:
        import git

        repo = git.Repo(tmp_path)
        repo.index.add(["train.py"])
        repo.index.commit("script")
    checked = CliRunner().invoke(cli, ["train.py", "--isolated"])
    assert checked.exit_code == 2 and "E999" in checked.output
    r = CliRunner().invoke(cli, ["train.py", "--isolated", "--apply", *extra])
    assert r.exit_code == 2, r.output
    assert "E999" in r.output and "no fixes to apply" not in r.output
    assert script.read_bytes() == data and not runner.calls


def test_apply_refuses_an_undecidable_configuration_before_the_profile_run(tmp_path) -> None:
    """`--runs 2` (4 runs at most) cannot decide at alpha/2, the level two fixes give each A/B that
    can commit: say so before spending a profile run on it."""
    git_repo(tmp_path, {"train.py": "# fake: speed=100 noise=0.01\nprint('train')\n"})
    runner = FakeRunner()
    with pytest.raises(ApplyError, match="can never reach significance"):
        apply_with_fakes(tmp_path / "train.py", ("X1", "X2"), runner=runner,
                         config=ABConfig(runs=2, max_runs=4, steps=5, warmup=1))
    assert not runner.calls
    # with one fix that can run here (the other gains only on CUDA) the level may be alpha: not refused early
    rc, out = apply_with_fakes(tmp_path / "train.py", ("X1", "X2"), runner=runner, no_commit=True,
                               config=ABConfig(runs=2, max_runs=4, steps=5, warmup=1, bootstrap_resamples=300),
                               gains_on=lambda c: "cuda" if c == "X2" else "any")
    assert runner.calls and rc in (0, 1), out
    assert Path(tmp_path / "train.py").exists()
