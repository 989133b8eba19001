"""The held-out check, kept: public framework training scripts (Hugging Face Trainer/Seq2Seq/TRL,
Lightning Trainer/Fabric/LightningCLI, Accelerate loops, a diffusers fine-tune), condensed and
rewritten in tests/rules/data/frameworks/real/, and well-known plain PyTorch training scripts
(nanoGPT's train.py, build-nanogpt's train_gpt2.py) in tests/rules/data/real/, with their source
named in each header. Every finding (position, code, message, fix or reason for none) is compared
with the reviewed snapshot FINDINGS.snap of each folder, so a rule change that adds or drops one
shows as a diff to review; the combined unsafe rewrite of each script must re-parse and be
idempotent. Lint only, in process.

Rewrite the snapshot with ``python -m pytest tests/rules/test_real_framework_scripts.py
--update-snapshots`` and read ``git diff``."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection

DATA = Path(__file__).parent / "data"
# folder -> the fewest scripts it may hold (a held-out set must not shrink unnoticed)
FOLDERS = {DATA / "frameworks" / "real": 25, DATA / "real": 2}
SCRIPTS = sorted(p for folder in FOLDERS for p in folder.glob("*.py"))
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))


def _render(path: Path) -> str:
    res = check_source(path.read_bytes(), path.name, ALL)
    lines = [f"== {path.name}: {len(res.diagnostics)} finding(s)"]
    for d in res.diagnostics:
        fix = f"fix {d.fix['safety']}: {d.fix['description']}" if d.fix else f"no fix: {d.no_fix_reason or '-'}"
        lines.append(f"{d.line}:{d.column} {d.code} {d.message}\n    {fix}")
    return "\n".join(lines) + "\n"


def _update(config: pytest.Config) -> bool:
    return bool(config.getoption("--update-snapshots", default=False) or os.environ.get("GPUPERF_UPDATE_SNAPSHOTS"))


@pytest.mark.parametrize("folder", list(FOLDERS), ids=lambda p: p.relative_to(DATA).as_posix())
def test_real_scripts_match_the_reviewed_findings(folder: Path, request: pytest.FixtureRequest) -> None:
    scripts = sorted(folder.glob("*.py"))
    assert len(scripts) >= FOLDERS[folder], "the held-out set shrank"
    text = "".join(_render(p) for p in scripts)
    snapshot = folder / "FINDINGS.snap"
    if _update(request.config):
        snapshot.write_text(text)
    assert snapshot.exists(), "FINDINGS.snap is missing: run with --update-snapshots and review it"
    expected = snapshot.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "FINDINGS.snap", "now"))
    assert not diff, f"findings on the real scripts of {folder.name} changed; review, then --update-snapshots:\n" + diff


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_real_framework_script_rewrite_reparses_and_is_idempotent(script: Path) -> None:
    res = check_source(script.read_bytes(), script.name, ALL, "unsafe")
    if res.fixed is None:
        return  # nothing to fix on this script
    assert not res.warnings, res.warnings
    cst.parse_module(res.fixed)
    compile(res.fixed, script.name, "exec")
    assert check_source(res.fixed, script.name, ALL, "unsafe").fixed is None, "a second pass changed the file"


def test_every_real_script_names_its_source() -> None:
    for script in SCRIPTS:
        head = script.read_text().split("\n", 3)
        assert head[0].startswith("# Held-out shape of "), script.name
