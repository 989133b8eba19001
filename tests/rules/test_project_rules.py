"""Rules across the user's own modules (issue 27), on test projects laid out as real ones are
(tests/rules/projects/<name>/: main.py + engine.py + models/ + utils.py; a Trainer class with
run_step(batch) and a loader's next_batch(); a src/ package). Each project's findings, linted as
a folder, are a reviewed snapshot (tests/rules/projects/<name>.snap; rewrite with
``--update-snapshots`` and read the diff), and the facts the rules read there are checked."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from gpuperf_rewrite.lint import project_facts as project_mod
from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules
from tests.helpers.rule_cases import diagnostic_lines, unified

PROJECTS = Path(__file__).parent / "projects"
NAMES = sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())
ALL = RuleSet(tuple(all_rules()), {})


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _lint(root: Path, *, alone: bool = False, mode: str = "none") -> dict[str, object]:
    """Each file's result, by its path below ``root``; ``alone``: without the project's facts.
    The checked-in projects are linted once per way (the suite's time)."""
    if root.parent == PROJECTS:
        return _lint_kept(root, alone, mode)
    return _lint_now(root, alone, mode)


def _lint_now(root: Path, alone: bool, mode: str) -> dict[str, object]:
    return {p.relative_to(root).as_posix(): check_source(p.read_bytes(), p.relative_to(root).as_posix(), ALL,
                                                         mode, fs_path=None if alone else str(p))
            for p in _files(root)}


@functools.lru_cache(maxsize=None)
def _lint_kept(root: Path, alone: bool, mode: str) -> dict[str, object]:
    return _lint_now(root, alone, mode)


def render(root: Path) -> str:
    lines = [f"# {root.name}: reviewed snapshot of every rule on the project's files, each checked with",
             "# the facts of the user's modules it imports; regenerate with",
             "#   python -m pytest tests/rules/test_project_rules.py --update-snapshots"]
    fixed = _lint(root, mode="unsafe")
    for rel, res in _lint(root).items():
        for d in res.diagnostics:  # type: ignore[attr-defined]
            lines += diagnostic_lines(d, f"{rel}:{d.line}:{d.column} {d.code} {d.name}")
    lines.append("=== fix diff (all fixes, unsafe included; each file's fixes touch only that file)")
    for rel, res in fixed.items():
        if res.fixed is not None:  # type: ignore[attr-defined]
            lines.append(unified(res.original.decode(), res.fixed.decode(), rel).rstrip("\n"))  # type: ignore[attr-defined]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", NAMES)
def test_project_matches_its_snapshot(name: str, request: pytest.FixtureRequest) -> None:
    actual = render(PROJECTS / name)
    snap = PROJECTS / f"{name}.snap"
    if request.config.getoption("--update-snapshots", default=False) or os.environ.get("GPUPERF_UPDATE_SNAPSHOTS"):
        snap.write_text(actual, encoding="utf-8")
        return
    assert snap.exists(), f"{snap.name} is missing: run with --update-snapshots and review it"
    expected = snap.read_text(encoding="utf-8")
    if actual != expected:
        pytest.fail(f"{name}: the findings changed (review; rerun with --update-snapshots):\n"
                    + unified(expected, actual, snap.name), pytrace=False)


def _codes(results: dict[str, object], rel: str) -> list[str]:
    return [d.code for d in results[rel].diagnostics]  # type: ignore[attr-defined]


def test_the_step_in_another_module_reports_where_the_fix_goes() -> None:
    """(a, b, c) main.py hands model, loader and optimizer to engine.train_one_epoch: compile,
    TF32, cuDNN benchmark and the fused optimizer are reported in main.py (where the model and
    optimizer are built), autocast in engine.py (around the forward), each once."""
    root = PROJECTS / "engine_split"
    alone, seen = _lint(root, alone=True), _lint(root)
    assert _codes(alone, "main.py") == []
    assert sorted(_codes(seen, "main.py")) == ["GP302", "GP303", "GP304", "GP305"]
    assert _codes(seen, "engine.py") == ["GP301"]
    for module in ("utils.py", "models/__init__.py", "models/resnet.py"):
        assert _codes(seen, module) == []
    gp303 = next(d for d in seen["main.py"].diagnostics if d.code == "GP303")  # type: ignore[attr-defined]
    assert "`model`" in gp303.message  # found through utils.add_weight_decay(model, wd)


def test_gradients_zeroed_in_a_helper_module_are_no_missing_zero_grad() -> None:
    """(d) The false alarm a user sees first: zero_grad(params) of utils.py, clear_grads(opt) of
    a src/ package's module (a relative import)."""
    for root, rel in ((PROJECTS / "engine_split", "engine.py"),
                      (PROJECTS / "src_layout", "src/trainpkg/loop.py")):
        assert "GP401" in _codes(_lint(root, alone=True), rel)  # what checking it alone said
        assert "GP401" not in _codes(_lint(root), rel)


def test_a_helper_that_does_not_zero_keeps_the_finding(tmp_path: Path) -> None:
    root = tmp_path / "engine_split"
    shutil.copytree(PROJECTS / "engine_split", root)
    utils = root / "utils.py"
    utils.write_text(utils.read_text().replace("        p.grad = None", "        print(p.grad)"))
    assert "GP401" in _codes(_lint(root), "engine.py")


def test_batches_from_a_method_or_a_custom_loader_are_seen() -> None:
    """(e) ``x, y = train_loader.next_batch()`` with the loader class in data.py, and ``batch =
    next(self.data)`` handed to ``self.run_step(batch)``."""
    root = PROJECTS / "trainer_class"
    alone, seen = _lint(root, alone=True), _lint(root)
    assert "GP104" not in _codes(alone, "pretrain.py")
    assert _codes(seen, "pretrain.py").count("GP104") == 2
    assert _codes(seen, "train.py").count("GP104") == 2


def test_a_fix_that_belongs_in_another_module_names_it() -> None:
    root = PROJECTS / "trainer_class"
    gp305 = [d for d in _lint(root)["train.py"].diagnostics if d.code == "GP305"]  # type: ignore[attr-defined]
    assert len(gp305) == 1 and gp305[0].fix is None
    assert gp305[0].no_fix_reason.endswith("add fused= at optim.py:9")
    assert _codes(_lint(root), "optim.py") == []  # reported once, at the call


def test_the_facts_are_computed_from_source_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_text(
        f"open({str(marker)!r}, 'w')\n\ndef clear(opt):\n    opt.zero_grad()\n")
    main = tmp_path / "main.py"
    main.write_text("import helpers\n")
    facts = project_mod.project_facts(main, main.read_bytes()).modules
    assert facts["helpers"].functions["clear"].zeroes_grads
    assert facts["helpers"].functions["clear"].roles == (("opt", "optimizer"),)
    assert not marker.exists()


def test_each_module_is_parsed_once_in_a_folder_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[Path] = []
    real = project_mod._parsed

    def counting(path: Path, data: bytes, sha: str):  # type: ignore[no-untyped-def]
        if project_mod._PARSED.get(path, ("",))[0] != sha:
            parsed.append(path)
        return real(path, data, sha)

    monkeypatch.setattr(project_mod, "_PARSED", {})
    monkeypatch.setattr(project_mod, "_FACTS_MEMO", {})
    monkeypatch.setattr(project_mod, "_parsed", counting)
    _lint_now(PROJECTS / "engine_split", False, "none")
    assert parsed and len(parsed) == len(set(parsed))


def test_a_model_picked_by_name_from_the_users_models_package(tmp_path: Path) -> None:
    """(b) ``models.__dict__[args.arch]()`` and ``getattr(models, name)()``: the package's models
    (resnet.py, imported by models/__init__.py) convolve and multiply matrices."""
    root = tmp_path / "engine_split"
    shutil.copytree(PROJECTS / "engine_split", root)
    main = root / "main.py"
    for pick in ("models.__dict__[args.arch](num_classes=10)", "getattr(models, args.arch)(num_classes=10)"):
        main.write_text((PROJECTS / "engine_split/main.py").read_text().replace(
            "models.build_model(args.arch, num_classes=10)", pick))
        found = _lint_now(root, False, "none")["main.py"].diagnostics  # type: ignore[attr-defined]
        assert {"GP302", "GP304"} <= {d.code for d in found}, pick


def test_an_engine_module_handed_a_ddp_model_and_a_test_loader_read_once() -> None:
    """main.py wraps the model in DDP and hands it to engine.py's accumulating loop (GP504 there,
    no fix: the wrap is the caller's); the test loader goes once to engine.evaluate, which does not
    train: one pass, no GP203."""
    results = _lint(PROJECTS / "ddp_engine")
    codes = {rel: [d.code for d in res.diagnostics] for rel, res in results.items()}  # type: ignore[attr-defined]
    assert codes["engine.py"] == ["GP504"]
    assert "GP203" not in codes["main.py"]
    finding = results["engine.py"].diagnostics[0]  # type: ignore[attr-defined]
    assert "`model.no_sync()`" in finding.message and finding.no_fix_reason
