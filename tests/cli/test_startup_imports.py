"""Start-up (issue 20 item 7): a lint run imports what it needs when it needs it. A run whose
files are all cleared by the torch gate imports neither LibCST nor a rule; a training script
does. Each case runs the real CLI in a fresh interpreter and reads its ``sys.modules`` after
``main`` returned (benchmarks/startup.py measures the time; tests never time anything)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuperf_rewrite.lint import docgen, registry, rule_index

PROBE = textwrap.dedent("""\
    import json, sys
    from gpuperf_rewrite.cli import main
    try:
        main(sys.argv[2:])
    except SystemExit as exc:
        code = exc.code
    with open(sys.argv[1], "w") as out:
        json.dump({"exit": code, "modules": sorted(sys.modules)}, out)
""")
TRAIN = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    if __name__ == "__main__":
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            print("loss", loss.item())
""")
PYPROJECT = textwrap.dedent("""\
    [tool.gpuperf]
    select = ["GP1", "GP2", "GP405"]
    ignore = ["GP102"]
    per-file-ignores = { "scripts/*" = ["GP201"] }
""")


def heavy(modules: list[str]) -> list[str]:
    """LibCST, and the rules beyond the torch gate's own module."""
    return [m for m in modules if m == "libcst" or m.startswith("gpuperf_rewrite.rules.")
            and m not in TORCH_GATE]


# The torch gate's own module and the (docstring-only) packages above it.
TORCH_GATE = {"gpuperf_rewrite.rules.analysis", "gpuperf_rewrite.rules.analysis.syntax",
              "gpuperf_rewrite.rules.analysis.syntax.torch_roots"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "util.py").write_text('import os\n\n\ndef here():\n    return os.getcwd()  # torch.cuda\n')
    (tmp_path / "skipped.py").write_text("# gpuperf: skip-file\nimport torch\nprint(torch.ones(1).item())\n")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "model.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    return tmp_path


def lint(project: Path, *args: str) -> dict:
    probe, report = project / "probe.py", project / "report.json"
    probe.write_text(PROBE)
    subprocess.run([sys.executable, str(probe), str(report), *args], cwd=project, check=True,
                   capture_output=True, timeout=120)
    return json.loads(report.read_text())


@pytest.mark.parametrize("args", [
    ("check", "--force-exclude", "util.py"),  # the pre-commit hook
    ("check", "--force-exclude", "--fix", "util.py", "skipped.py"),  # the fixing hook
    ("--no-cache", "--select", "ALL", "util.py"),
])
def test_files_the_torch_gate_clears_import_no_parser_and_no_rule(project, args):
    res = lint(project, *args)
    assert res["exit"] == 0
    assert heavy(res["modules"]) == []
    assert "tempfile" not in res["modules"]  # the cache writes without it; only --fix's writes need it


def test_a_training_script_is_analysed_and_then_answered_from_the_cache(project):
    cold = lint(project, "check", "train.py", "util.py")
    assert cold["exit"] == 1 and "libcst" in cold["modules"]  # the probe sees a real analysis
    assert "tempfile" not in cold["modules"]  # a cache entry was written, without tempfile
    warm = lint(project, "check", "train.py", "util.py")
    assert warm["exit"] == 1
    assert heavy(warm["modules"]) == []  # an unchanged script: the cached result, nothing parsed


def test_torch_code_no_rule_can_fire_on_is_cached_too(project):
    """It imports torch, so the engine decides (and imports the rules); the answer is cached."""
    cold = lint(project, "check", "model.py")
    assert cold["exit"] == 0 and "gpuperf_rewrite.lint.engine" in cold["modules"]
    warm = lint(project, "check", "model.py")
    assert warm["exit"] == 0 and heavy(warm["modules"]) == []


def test_the_rule_index_is_up_to_date():
    assert (Path(docgen.__file__).parent / "rule_index.py").read_text() == docgen.render_index(), \
        "gpuperf_rewrite/lint/rule_index.py is stale: run `make docs`"
    assert rule_index.MODULES == registry.rule_modules()


def test_a_rule_module_the_index_does_not_know_makes_selection_import_the_rules(monkeypatch):
    """A new or moved rule module before `make docs`: slower, never a wrong selection."""
    registry.rule_table.cache_clear()
    monkeypatch.setattr(rule_index, "MODULES", rule_index.MODULES[1:])
    monkeypatch.setattr(rule_index, "RULES", {})
    try:
        assert registry.resolve_selection(["GP1"]) == [c for c, r in registry.all_rules().items()
                                                       if c.startswith("GP1") and r.default_enabled]
    finally:
        registry.rule_table.cache_clear()


EXIT_PROBE = textwrap.dedent("""\
    import atexit, gc, sys
    atexit.register(lambda: open(sys.argv[1], "w").write(str(gc.get_freeze_count())))  # runs last
    from gpuperf_rewrite.cli import main
    main(sys.argv[2:])
""")


def test_the_shutdown_collections_skip_what_the_run_built(project):
    """At exit every object is in the collector's permanent generation (the shutdown's
    collections would otherwise walk LibCST's classes and the rules' data: ~35 ms of a one-file
    lint); the run's output and exit code are as without it."""
    probe, report = project / "exit_probe.py", project / "freeze.txt"
    probe.write_text(EXIT_PROBE)
    out = subprocess.run([sys.executable, str(probe), str(report), "check", "--no-cache", "train.py"],
                         cwd=project, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "train.py:" in out.stdout
    assert int(report.read_text()) > 10_000
