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
    # GP301 also at main.py's model line, without a fix (issue 34: the user builds the model there)
    assert sorted(_codes(seen, "main.py")) == ["GP301", "GP302", "GP303", "GP304", "GP305"]
    assert _codes(seen, "engine.py") == ["GP301"]  # with its autocast fix, where the forward runs
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


def test_an_optimizer_factory_is_reported_where_the_edit_goes() -> None:
    """Issue 34: the optimizer built by ``build_optimizer`` of optim.py is reported at its
    construction in optim.py, with the fix there (the factory is handed the model), once: not at
    the call in train.py."""
    root = PROJECTS / "trainer_class"
    seen = _lint(root)
    assert "GP305" not in _codes(seen, "train.py")
    gp305 = [d for d in seen["optim.py"].diagnostics if d.code == "GP305"]  # type: ignore[attr-defined]
    assert len(gp305) == 1 and gp305[0].line == 9 and gp305[0].fix is not None
    assert "fused=next(model.parameters()).is_cuda" in _lint(root, mode="unsafe")["optim.py"].fixed.decode()  # type: ignore[attr-defined]


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


def _variant(tmp_path: Path, name: str, edits: dict[str, tuple[str, str]]) -> Path:
    """A copy of a checked-in project with each file's ``old`` text replaced by ``new``."""
    root = tmp_path / name
    shutil.copytree(PROJECTS / name, root)
    for rel, (old, new) in edits.items():
        text = (root / rel).read_text()
        assert old in text, (rel, old)
        (root / rel).write_text(text.replace(old, new))
    return root


def test_models_from_registries_builders_and_methods_of_other_modules() -> None:
    """Issue 34, class 1: ``create_model(name)`` over a ``@register_model`` table re-exported by a
    package, ``build_model(cfg)`` dispatching over a dict of classes, ``exp.get_model()``: the
    entry trains them, so compile, TF32 and cuDNN benchmark are reported there, naming the module
    the model comes from; checked alone, nothing is."""
    for name, expected in (("factory_registry", {"GP302", "GP303", "GP304"}),
                           ("trainer_receives", {"GP301", "GP302", "GP303", "GP304", "GP305"}),
                           ("exp_methods", {"GP303", "GP304"})):
        root = PROJECTS / name
        assert set(_codes(_lint(root), "train.py")) == expected, name
        assert not {"GP302", "GP303", "GP304"} & set(_codes(_lint(root, alone=True), "train.py")), name
    found = {d.code: d.message for d in _lint(PROJECTS / "factory_registry")["train.py"].diagnostics}  # type: ignore[attr-defined]
    assert found["GP304"].endswith("(the model comes from models/__init__.py)")


def test_a_model_handed_to_a_trainer_class_of_another_module() -> None:
    """``Trainer(model, optimizer, loader, device).fit(n)``: the step is in trainer.py, the model
    in train.py; GP303 names the trainer, GP301 is reported at train.py's model line (trainer.py
    has no device for an autocast fix)."""
    seen = _lint(PROJECTS / "trainer_receives")
    gp303 = next(d for d in seen["train.py"].diagnostics if d.code == "GP303")  # type: ignore[attr-defined]
    assert "`model`" in gp303.message and "trained by `Trainer` in trainer.py" in gp303.message
    # GP301 at train.py's model line: trainer.py has no device to give an autocast a fix, and the
    # model and its precision are chosen in train.py
    assert _codes(seen, "trainer.py") == []
    assert "GP301" in _codes(seen, "train.py")
    for module in ("modeling/__init__.py", "modeling/build.py", "modeling/backbones.py"):
        assert _codes(seen, module) == []


def test_valid_twins_of_the_factory_projects_stay_quiet(tmp_path: Path) -> None:
    """The trainer compiles what it is handed; the factory chooses fused=/foreach= itself or in
    its keyword dict, or lets its caller's keywords reach the constructor."""
    root = _variant(tmp_path, "trainer_receives", {
        "trainer.py": ("self.model = model.to(device)", "self.model = torch.compile(model.to(device))")})
    assert "GP303" not in _codes(_lint_now(root, False, "none"), "train.py")
    # the trainer chooses cuDNN's algorithms (a tuple assignment, as seeding helpers write it); a
    # module the script imports sets TF32 when imported
    root = _variant(tmp_path / "settings", "trainer_receives", {
        "trainer.py": ("        self.log_every = log_every\n",
                       "        self.log_every = log_every\n"
                       "        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, False\n"),
        "modeling/build.py": ('MODELS = {', 'torch.set_float32_matmul_precision("high")\nMODELS = {'),
    })
    (root / "modeling/build.py").write_text("import torch\n" + (root / "modeling/build.py").read_text())
    assert not {"GP302", "GP304"} & set(_codes(_lint_now(root, False, "none"), "train.py"))
    # a choice made only when asked (``if deterministic: ...``) leaves the default run without one
    root = _variant(tmp_path / "opt_in", "trainer_receives", {
        "trainer.py": ("        self.log_every = log_every\n",
                       "        self.log_every = log_every\n"
                       "        if log_every == 0:\n"
                       "            torch.use_deterministic_algorithms(True)\n")})
    assert "GP304" in _codes(_lint_now(root, False, "none"), "train.py")
    cases = {  # the edit of optim_factory.py -> the lines still reported there
        "fused": (("optim.AdamW(parameters, **opt_args)", "optim.AdamW(parameters, fused=True, **opt_args)"), [22]),
        "foreach": (("dict(lr=args.lr, weight_decay=0.0)", "dict(lr=args.lr, weight_decay=0.0, foreach=True)"), []),
        # keywords from a section of the configuration (``args.opt_kwargs``): what a configuration
        # file spells out, which leaves fused unset (models8: ALBEF's, wenet's optimizer factories)
        "kwargs": (("dict(lr=args.lr, weight_decay=0.0)", "dict(lr=args.lr, weight_decay=0.0, **args.opt_kwargs)"),
                   [22, 24]),
    }
    for case, (edit, lines) in cases.items():
        root = _variant(tmp_path / case, "factory_registry", {"optim_factory.py": edit})
        found = [d.line for d in _lint_now(root, False, "none")["optim_factory.py"].diagnostics]  # type: ignore[attr-defined]
        assert found == lines, case


def test_a_gradscaler_held_by_a_wrapper_class_of_the_users_code() -> None:
    """Issue 34, class 3: ``loss_scaler = NativeScaler()`` (utils.py makes the GradScaler) handed to
    engine.train_one_epoch, which calls ``loss_scaler(loss, optimizer)`` under float16 autocast:
    not "float16 autocast without a GradScaler"."""
    seen = _lint(PROJECTS / "factory_registry")
    assert "GP301" not in _codes(seen, "engine.py")
    assert "GP301" not in _codes(seen, "train.py")


def test_a_class_that_does_not_train_is_no_training(tmp_path: Path) -> None:
    root = _variant(tmp_path, "trainer_receives", {
        "trainer.py": ("        loss.backward()\n        self.optimizer.step()\n", "")})
    found = _lint_now(root, False, "none")
    assert not {"GP302", "GP303", "GP304"} & set(_codes(found, "train.py"))


def test_a_subclass_of_the_users_trainer_trains(tmp_path: Path) -> None:
    """``class Trainer(DefaultTrainer)`` in the script, the step in the base class of engine/:
    the script trains, so the model it builds is reported there."""
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "engine/__init__.py": "from .base import BaseTrainer\n",
        "engine/base.py": (
            "import torch\n\n\n"
            "class BaseTrainer:\n"
            "    def __init__(self, model, optimizer, loader):\n"
            "        self.model, self.optimizer, self.loader = model, optimizer, loader\n\n"
            "    def train(self):\n"
            "        for x, y in self.loader:\n"
            "            loss = torch.nn.functional.cross_entropy(self.model(x), y)\n"
            "            self.optimizer.zero_grad()\n"
            "            loss.backward()\n"
            "            self.optimizer.step()\n"),
        "train.py": (
            "import torch\n"
            "from torch import nn\n"
            "from engine import BaseTrainer\n\n\n"
            "class Trainer(BaseTrainer):\n"
            "    def after_step(self):\n"
            "        pass\n\n\n"
            "model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()\n"
            "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)\n"
            "Trainer(model, optimizer, torch.load('batches.pt')).train()\n"),
    })
    assert {"GP302", "GP303"} <= set(_codes(_lint_now(root, False, "none"), "train.py"))
    assert not {"GP302", "GP303"} & set(_codes(_lint_now(root, True, "none"), "train.py"))


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_model_from_a_registry_object_filled_elsewhere(tmp_path: Path) -> None:
    """detectron2's shape: ``META_ARCH_REGISTRY = Registry("META_ARCH")`` in build.py, classes
    registered by ``@META_ARCH_REGISTRY.register()`` in another module of the package,
    ``build_model(cfg)`` returning ``META_ARCH_REGISTRY.get(name)(cfg)``."""
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "utils/__init__.py": "",
        "utils/registry.py": ("class Registry:\n    def __init__(self, name):\n        self._obj_map = {}\n\n"
                              "    def register(self):\n        def deco(cls):\n"
                              "            self._obj_map[cls.__name__] = cls\n            return cls\n        return deco\n\n"
                              "    def get(self, name):\n        return self._obj_map[name]\n"),
        "modeling/__init__.py": "from .build import META_ARCH_REGISTRY, build_model\nfrom .rcnn import RCNN\n",
        "modeling/build.py": ("import torch\nfrom utils.registry import Registry\n\n"
                              "META_ARCH_REGISTRY = Registry(\"META_ARCH\")\n\n\n"
                              "def build_model(cfg):\n    model = META_ARCH_REGISTRY.get(cfg.arch)(cfg)\n"
                              "    model.to(torch.device(cfg.device))\n    return model\n"),
        "modeling/rcnn.py": ("from torch import nn\nfrom .build import META_ARCH_REGISTRY\n\n\n"
                             "@META_ARCH_REGISTRY.register()\nclass RCNN(nn.Module):\n    def __init__(self, cfg):\n"
                             "        super().__init__()\n        self.backbone = nn.Conv2d(3, 64, 7)\n"
                             "        self.head = nn.Linear(64, cfg.num_classes)\n\n"
                             "    def forward(self, x):\n        return self.head(self.backbone(x).mean((2, 3)))\n"),
        "train.py": ("import torch\nfrom modeling import build_model\n\n\ndef main(cfg, loader):\n"
                     "    model = build_model(cfg)\n"
                     "    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, foreach=True)\n"
                     "    for images, targets in loader:\n"
                     "        loss = torch.nn.functional.cross_entropy(model(images), targets)\n"
                     "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"),
    })
    found = {d.code: d for d in _lint_now(root, False, "none")["train.py"].diagnostics}  # type: ignore[attr-defined]
    assert {"GP302", "GP304"} <= set(found)
    assert found["GP304"].line == 6 and "(the model comes from modeling/__init__.py)" in found["GP304"].message


def test_per_step_work_in_helper_modules_is_reported_where_it_is_written() -> None:
    """Issue 34, class B: a loss class, a batch-moving helper and a gradient clipper of other
    modules, called every step by train.py's loop, are per-step code in their own modules (a sync
    under a parameter that defaults to True too); a helper called under the loop's periodic guard
    and one called once per epoch are not. Checked
    alone (no project), the helper modules report nothing but the loss's own forward (an
    ``nn.Module``: every call of the module runs it)."""
    root = PROJECTS / "step_helpers"
    alone, seen = _lint(root, alone=True), _lint(root)
    for module in ("utils/batching.py", "utils/grads.py"):
        assert [c for c in _codes(alone, module) if c.startswith("GP1")] == []
    own = [d for d in alone["losses.py"].diagnostics if d.code.startswith("GP1")]  # type: ignore[attr-defined]
    assert [d.code for d in own] == ["GP105", "GP105"]
    assert all("every call of the module" in d.message for d in own)
    assert sorted(_codes(seen, "losses.py")) == ["GP101", "GP105", "GP105"]
    assert _codes(seen, "utils/batching.py") == ["GP104", "GP104", "GP104"]
    grads = seen["utils/grads.py"].diagnostics  # type: ignore[attr-defined]
    assert [d.code for d in grads] == ["GP101", "GP103"] and grads[0].line == 13  # not grad_report's
    assert "train.py:31 calls `clip_by_value`" in grads[0].message
    assert "calls `timed`" in grads[1].message  # its ``sync=True`` switch is on by default


def test_a_helper_rechecked_when_its_caller_stops_calling_it_every_step(tmp_path: Path) -> None:
    """The finding in the helper depends on the caller's loop: moving the call under a periodic
    guard in train.py removes it (the lint cache keys the helper's result on its importers)."""
    from gpuperf_rewrite.lint.step_callers import step_callers_key_of

    root = tmp_path / "step_helpers"
    shutil.copytree(PROJECTS / "step_helpers", root)
    grads, train = root / "utils" / "grads.py", root / "train.py"
    before = step_callers_key_of(str(grads), grads.read_bytes())
    assert "GP101" in _codes(_lint(root), "utils/grads.py")
    train.write_text(train.read_text().replace(
        "            clip_by_value(model.parameters(), 1.0)\n",
        "            if step % 50 == 0:\n                clip_by_value(model.parameters(), 1.0)\n"))
    assert step_callers_key_of(str(grads), grads.read_bytes()) != before
    assert "GP101" not in _codes(_lint(root), "utils/grads.py")


def test_objects_built_from_configurations_by_a_first_party_helper(tmp_path: Path) -> None:
    """config_built: the network and its optimizer are built by ``registry.build_from_name`` (a
    class named by a string, imported with importlib); the optimizer is handed ``net.parameters()``
    and stepped, so ``net`` is the trained model (GP303 in loop.py, with the compile before the
    chosen DDP wrapper); the optimizer's class is named in train.py's keywords (GP305 there). Checked
    alone, loop.py cannot tell what the helper builds, but what the step loop steps after the
    backward is an optimizer whatever builds it (``facts.stepped_optimizers``): GP303 there too."""
    root = PROJECTS / "config_built"
    alone, seen = _lint(root, alone=True), _lint(root)
    assert "GP303" in _codes(alone, "loop.py")
    assert sorted(_codes(seen, "loop.py")) == ["GP303", "GP502"]
    assert _codes(seen, "train.py") == ["GP305"]
    # the helper reached through its package (``import tools``; ``tools.registry.build_from_name``)
    through = tmp_path / "through_package"
    shutil.copytree(root, through)
    (through / "tools" / "__init__.py").write_text("from . import registry\n")
    loop = through / "loop.py"
    loop.write_text(loop.read_text().replace("from tools import registry", "import tools")
                    .replace("registry.build_from_name", "tools.registry.build_from_name"))
    assert "GP303" in _codes(_lint(through), "loop.py")
    # a helper that is no optimizer (its result is updated, never stepped): not read as one
    copy = tmp_path / "config_built"
    shutil.copytree(root, copy)
    loop = copy / "loop.py"
    loop.write_text(loop.read_text().replace("optimizer.step()", "optimizer.update()").replace("optimizer", "averager"))
    assert "GP303" not in _codes(_lint(copy), "loop.py")


def test_a_model_handed_to_an_update_class_is_reported_once_where_it_is_built(tmp_path: Path) -> None:
    """handed_model: main.py builds the policy and hands it to agents.ActorCriticUpdate, which
    builds the optimizer over it: GP303 is reported at main.py's model line only (before: also in
    agents.py, at the optimizer, with no fix there). An imported module that neither builds nor
    moves the model it is handed leaves the compile to whoever builds it, linted alone too."""
    root = PROJECTS / "handed_model"
    seen = _lint(root)
    assert _codes(seen, "main.py") == ["GP301", "GP303"]
    assert "GP303" not in _codes(seen, "agents.py")
    assert "GP303" not in _codes(_lint(root, alone=True), "agents.py")
    # GP301 too, at main.py's model line: agents.py's step has no fix (no device variable there)
    assert "GP301" not in _codes(seen, "agents.py")
    assert "GP301" in _codes(_lint(root, alone=True), "agents.py")  # checked alone: no entry known
    # a module that moves the model it is handed keeps its finding: the fix goes there
    copy = tmp_path / "handed_model"
    shutil.copytree(root, copy)
    agents = copy / "agents.py"
    agents.write_text(agents.read_text().replace("self.policy = policy\n", "self.policy = policy.cuda()\n"))
    assert "GP303" in _codes(_lint(copy), "agents.py")


_OPTIONS = (
    "import random\nfrom dataclasses import dataclass\n\nimport torch\n\n\n"
    "@dataclass\nclass RunOptions:\n    seed: int = 0\n    tf32: bool = True\n\n"
    "    @staticmethod\n    def configure_matmul(enabled: bool):\n"
    "        if torch.cuda.is_available() and hasattr(torch.backends, \"cuda\"):\n"
    "            torch.backends.cuda.matmul.allow_tf32 = enabled\n\n"
    "    def fix_randomness(self, fast_kernels: bool = True):\n"
    "        random.seed(self.seed)\n        torch.backends.cudnn.benchmark = fast_kernels\n\n\n"
    "def load_options():\n    opts = RunOptions()\n    opts.configure_matmul(opts.tf32)\n"
    "    opts.fix_randomness(fast_kernels=True)\n    return opts\n")
_CONV_TRAIN = (
    "import torch\nfrom torch import nn\n\n{imports}\n\n\ndef main():\n{setup}"
    "    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()\n"
    "    optimizer = torch.optim.AdamW(model.parameters(), fused=True)\n"
    "    for x, y in torch.load(\"batches.pt\"):\n"
    "        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())\n"
    "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n\n\n"
    "if __name__ == \"__main__\":\n    main()\n")


@pytest.mark.parametrize("imports, setup", [
    ("from conf.options import load_options", "    opts = load_options()\n"),  # through a function
    ("from conf.options import RunOptions",  # the methods called on the object in the script
     "    opts = RunOptions()\n    opts.configure_matmul(True)\n    opts.fix_randomness()\n"),
], ids=["function", "methods"])
def test_tf32_and_cudnn_set_by_methods_of_a_settings_class(tmp_path: Path, imports: str, setup: str) -> None:
    """TF32 and cuDNN benchmarking set in methods of a settings class of another module (a static
    method behind ``if torch.cuda.is_available()``, a ``fast_kernels=True`` parameter), called on an
    instance by a function the script calls, or by the script itself: chosen, no GP302/GP304."""
    root = _tree(tmp_path, {"pyproject.toml": "", "conf/__init__.py": "", "conf/options.py": _OPTIONS,
                            "train.py": _CONV_TRAIN.format(imports=imports, setup=setup)})
    assert not {"GP302", "GP304"} & set(_codes(_lint_now(root, False, "none"), "train.py"))
    # an opt-in branch is no choice for the default run: still reported
    (root / "conf/options.py").write_text(_OPTIONS.replace("if torch.cuda.is_available() and hasattr(torch.backends, \"cuda\")",
                                                           "if enabled").replace(
        "        torch.backends.cudnn.benchmark = fast_kernels\n",
        "        if self.seed:\n            torch.backends.cudnn.benchmark = fast_kernels\n"))
    assert {"GP302", "GP304"} <= set(_codes(_lint_now(root, False, "none"), "train.py"))


_BATCHING = 'import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\ndef pad_clips(items):\n    clips, labels = zip(*items)\n    longest = max(c.shape[-1] for c in clips)\n    out = torch.zeros(len(clips), 1, longest)\n    for row, clip in enumerate(clips):\n        out[row, :, : clip.shape[-1]] = clip\n    return out, torch.tensor(labels)\n\n\nclass ClipLoader(DataLoader):\n    """Batches clips of different lengths, zero-padded to the longest."""\n\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n        self.collate_fn = pad_clips\n\n\nclass SpeakerLoader(DataLoader):\n    def __init__(self, dataset, batch_size=1, shuffle=False, **kwargs):\n        super(SpeakerLoader, self).__init__(dataset, batch_size, shuffle, collate_fn=pad_clips, **kwargs)\n\n\nclass BucketLoader(DataLoader):\n    def __init__(self, dataset, buckets, **kwargs):\n        super().__init__(dataset, batch_sampler=buckets, **kwargs)\n\n\nclass FeatureBank(Dataset):\n    """Pre-computed embeddings, loaded once."""\n\n    def __init__(self, path):\n        blob = torch.load(path)\n        self.features, self.targets = blob["x"], blob["y"]\n\n    def __len__(self):\n        return len(self.targets)\n\n    def __getitem__(self, i):\n        return self.features[i], self.targets[i]\n'
_LOADERS_TRAIN = 'import torch\n\nfrom audio.batching import BucketLoader, ClipLoader, FeatureBank, SpeakerLoader\nfrom audio import batching\n\n\ndef main():\n    clips = ClipLoader(torch.load("clips.pt"), batch_size=16, shuffle=True)\n    speakers = SpeakerLoader(torch.load("speakers.pt"), 16, True, num_workers=8)\n    buckets = BucketLoader(torch.load("clips.pt"), make_buckets())\n    bank = torch.utils.data.DataLoader(FeatureBank("bank.pt"), batch_size=512, shuffle=True, pin_memory=True)\n    bank2 = torch.utils.data.DataLoader(batching.FeatureBank("bank.pt"), batch_size=512, pin_memory=True)\n    model = torch.nn.Conv1d(1, 8, 5).cuda()\n    opt = torch.optim.AdamW(model.parameters(), fused=True)\n    for epoch in range(10):\n        for loader in (clips, speakers, buckets, bank, bank2):\n            for x, y in loader:\n                loss = model(x.cuda(non_blocking=True)).mean()\n                loss.backward()\n                opt.step()\n                opt.zero_grad()\n\n\nif __name__ == "__main__":\n    main()\n'


def test_loader_subclasses_and_in_memory_datasets_of_another_module(tmp_path: Path) -> None:
    """``ClipLoader``/``SpeakerLoader`` (audio/batching.py) subclass DataLoader and only fix the
    collate function, passing DataLoader's arguments through: the script's loaders built with them
    are DataLoaders (GP201/GP202/GP203, with fixes). ``BucketLoader`` takes a parameter of its own:
    not recognised. ``FeatureBank`` only indexes tensors it loaded: no GP201 for its loaders."""
    root = _tree(tmp_path, {"pyproject.toml": "", "audio/__init__.py": "", "audio/batching.py": _BATCHING,
                            "train.py": _LOADERS_TRAIN})
    found = _lint_now(root, False, "none")["train.py"]
    by_line = sorted((d.line, d.code) for d in found.diagnostics if d.code.startswith("GP2"))  # type: ignore[attr-defined]
    assert by_line == [(8, "GP201"), (8, "GP202"), (9, "GP202"), (9, "GP203")]
    assert "GP304" not in [d.code for d in found.diagnostics]  # type: ignore[attr-defined]  # clips padded per batch
    fixed = _lint_now(root, False, "unsafe")["train.py"].fixed.decode()  # type: ignore[attr-defined]
    assert "ClipLoader(torch.load(\"clips.pt\"), batch_size=16, shuffle=True, num_workers=min(8, os.cpu_count() or 1), " \
           "pin_memory=torch.cuda.is_available(), persistent_workers=True)" in fixed
    assert "SpeakerLoader(torch.load(\"speakers.pt\"), 16, True, num_workers=8, pin_memory=torch.cuda.is_available(), " \
           "persistent_workers=True)" in fixed
    # checked alone, the classes are unknown: nothing to say about those loaders
    alone = _lint_now(root, True, "none")["train.py"]
    assert not {d.line for d in alone.diagnostics if d.code.startswith("GP2")} & {8, 9, 10}  # type: ignore[attr-defined]


_RUN_ARGS = (
    "from tap import Tap\n\n\n"
    "class RunArgs(Tap):\n"
    "    data: str = \"shards/\"\n"
    "    batch: int = 64\n"
    "    workers: int = 0  # loader processes\n"
    "    prefetch: int = 2\n\n\n"
    "def parse_run_args() -> RunArgs:\n"
    "    args = RunArgs(explicit_bool=True).parse_args()\n"
    "    args.batch = max(1, args.batch)\n"
    "    args.workers = min(max(0, args.workers), args.batch)\n"
    "    return args\n")
_ARGS_TRAIN = (
    "import torch\nfrom torch.utils.data import DataLoader\n\nfrom conf.run_args import parse_run_args\n\n\n"
    "def main():\n"
    "    args = parse_run_args()\n"
    "    loader = DataLoader(torch.load(args.data), batch_size=args.batch, shuffle=True, num_workers=args.workers,\n"
    "                        pin_memory=True, prefetch_factor=args.prefetch)\n"
    "    model = torch.nn.Linear(128, 2).cuda()\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)\n"
    "    for epoch in range(5):\n"
    "        for x, y in loader:\n"
    "            torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()\n"
    "            opt.step()\n"
    "            opt.zero_grad()\n\n\n"
    "if __name__ == \"__main__\":\n    main()\n")


def test_a_worker_count_from_a_typed_arguments_class_defaulting_to_zero(tmp_path: Path) -> None:
    """``workers: int = 0`` in a Tap arguments class of another module (bounded, never raised, by
    its parser): the loader built with ``num_workers=args.workers`` is reported, naming the flag;
    not when the project's launch script passes it, nor when the default is positive."""
    root = _tree(tmp_path, {"pyproject.toml": "", "conf/__init__.py": "", "conf/run_args.py": _RUN_ARGS,
                            "train.py": _ARGS_TRAIN})
    (found,) = [d for d in _lint_now(root, False, "none")["train.py"].diagnostics  # type: ignore[attr-defined]
                if d.code == "GP201"]
    assert found.line == 9 and "`args.workers`" in found.message and "--workers" in found.no_fix_reason
    assert "GP201" not in _codes(_lint_now(root, True, "none"), "train.py")  # alone: the default is unseen
    (root / "scripts").mkdir()
    (root / "scripts/train.sh").write_text("#!/bin/bash\npython train.py --data /mnt/shards --workers 8\n")
    assert "GP201" not in _codes(_lint_now(root, False, "none"), "train.py")
    (root / "scripts/train.sh").unlink()
    (root / "conf/run_args.py").write_text(_RUN_ARGS.replace("workers: int = 0", "workers: int = 6"))
    assert "GP201" not in _codes(_lint_now(root, False, "none"), "train.py")


@pytest.mark.parametrize("build", ["model = Acoustic().cuda()", "model = Acoustic()\n    model = model.to('cuda')"])
def test_a_submodule_forward_run_by_a_model_of_another_modules_loop(tmp_path: Path, build: str) -> None:
    """Issue 34, class B (GP105): train.py builds the model (a chained constructor, or a
    constructor then a move that rebinds the name) and calls it every step; the model's forward
    calls a submodule held in ``self.front`` whose forward builds a legacy typed tensor on the CPU
    and moves it under a device test. Reported in nets.py at the move (a later statement than the
    creation, which the message names), naming train.py's call; checked alone, as what
    ``Gate.forward`` runs on every call of the module."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "nets.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Gate(nn.Module):\n"
        "    def forward(self, x):\n"
        "        keep = torch.ByteTensor(x.size()).zero_()\n"
        "        if x.is_cuda:\n"
        "            keep = keep.cuda()\n"
        "        return x * keep\n\n\n"
        "class Acoustic(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.front = Gate()\n"
        "        self.out = nn.Linear(80, 30)\n\n"
        "    def forward(self, x):\n"
        "        return self.out(self.front(x))\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom nets import Acoustic\n\n\n"
        "def main(loader):\n"
        f"    {build}\n"
        "    opt = torch.optim.AdamW(model.parameters(), fused=True)\n"
        "    for x, y in loader:\n"
        "        loss = (model(x.cuda(non_blocking=True)) - y.cuda(non_blocking=True)).pow(2).mean()\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n\n\n"
        "if __name__ == '__main__':\n    main([])\n")
    found = _lint(tmp_path)["nets.py"].diagnostics  # type: ignore[attr-defined]
    assert [(d.code, d.line) for d in found if d.code.startswith("GP1")] == [("GP105", 9)]
    assert "calls `Acoustic.forward`" in found[0].message and "keep = torch.ByteTensor" in found[0].message
    alone = [d for d in _lint(tmp_path, alone=True)["nets.py"].diagnostics  # type: ignore[attr-defined]
             if d.code.startswith("GP1")]
    assert [(d.code, d.line) for d in alone] == [("GP105", 9)]
    assert "forward pass of `Gate`" in alone[0].message


def test_a_trainer_holding_a_moved_model_keeps_the_entry_checked(tmp_path: Path) -> None:
    """trainer.py keeps ``self.model = model.to(device)`` and calls ``self.model(x)`` every step:
    the name holds no constructor of its own (the step calls' lookup once failed on it, trainer.py
    lost its facts and train.py every file-level finding)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "nets.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n")
    (tmp_path / "trainer.py").write_text(
        "from nets import Net\n\n\nclass Trainer:\n"
        "    def __init__(self, model, opt, device):\n"
        "        self.model = model.to(device)\n        self.opt = opt\n        self.device = device\n\n"
        "    def fit(self, loader):\n"
        "        for x, y in loader:\n"
        "            out = self.model(x.to(self.device, non_blocking=True))\n"
        "            loss = (out - y.to(self.device, non_blocking=True)).pow(2).mean()\n"
        "            self.opt.zero_grad()\n            loss.backward()\n            self.opt.step()\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom nets import Net\nfrom trainer import Trainer\n\n\n"
        "def main(loader):\n    model = Net()\n    opt = torch.optim.AdamW(model.parameters())\n"
        "    Trainer(model, opt, 'cuda').fit(loader)\n\n\n"
        "if __name__ == '__main__':\n    main([])\n")
    assert "GP305" in _codes(_lint(tmp_path), "train.py")


def test_hooks_the_hugging_face_trainer_calls_every_step_through_the_users_base_classes() -> None:
    """Issue 34, class B: a Trainer subclass of a subclass in another module (``DistillTrainer
    (RecipeTrainer)``, ``RecipeTrainer(Seq2SeqTrainer)``) and a callback of a user's callback base:
    ``compute_loss`` (and the helper it calls), ``prediction_step`` and ``on_step_end`` are per-step
    code; the read under the logging period and the one in ``on_evaluate`` are not. The bases are
    the facts of recipes/base.py, not names: checked alone, the subclasses report nothing."""
    root = PROJECTS / "hf_trainer_chain"
    facts = project_mod.project_facts(root / "recipes" / "distill.py",
                                      (root / "recipes" / "distill.py").read_bytes()).modules
    base = facts[".base"]
    assert base.trainer_classes == {"RecipeTrainer"} and base.callback_classes == {"RecipeCallback"}
    seen, alone = _lint(root), _lint(root, alone=True)
    found = seen["recipes/distill.py"].diagnostics  # type: ignore[attr-defined]
    assert [(d.code, d.line) for d in found] == [("GP101", 26), ("GP101", 32), ("GP101", 38)]
    assert "every training step: the Hugging Face Trainer calls `DistillTrainer.compute_loss`" in found[0].message
    assert "every eval batch" in found[1].message and "`TemperatureProbe.on_step_end`" in found[2].message
    assert _codes(alone, "recipes/distill.py") == []


def test_a_loop_handing_micro_batches_to_a_trainers_update_method(tmp_path: Path) -> None:
    """Issue 34, class B: ``updater.update(group)`` on a trainer the loop was handed (no type in
    sight: the one class of the user's modules with that method), whose method steps the optimizer
    once after the micro-batches' backward, makes the loop a training loop; the method's checks of
    the gradient norm are per step. Called every 50 iterations, they are still read on every
    optimizer step: one call of the method is a whole step (``model.step_functions``), and the period
    at the call site rate-limits the step itself, not the reads (an RL runner's ``if t % train_freq ==
    0: agent.update()``); a period inside the method does rate-limit them."""
    root = tmp_path / "update_step"
    shutil.copytree(PROJECTS / "update_step", root)
    found = _lint(root)["engine/updater.py"].diagnostics  # type: ignore[attr-defined]
    assert [(d.code, d.line) for d in found] == [("GP101", 24), ("GP101", 24)]
    assert "run.py:13 calls `Updater.update`" in found[0].message
    run = root / "run.py"
    run.write_text(run.read_text().replace("        stats = updater.update(group)\n",
                                           "        stats = None\n        if step % 50 == 0:\n"
                                           "            stats = updater.update(group)\n"))
    found = _lint(root)["engine/updater.py"].diagnostics  # type: ignore[attr-defined]
    assert [(d.code, d.line) for d in found] == [("GP101", 24), ("GP101", 24)]
    assert "one call of `Updater.update` is a whole step" in found[0].message
    updater = root / "engine" / "updater.py"
    updater.write_text(updater.read_text().replace(
        "        if torch.isinf(norm) or torch.isnan(norm):\n",
        "        self.skipped += 1\n        if self.skipped % 50 == 0 and (torch.isinf(norm) or torch.isnan(norm)):\n"))
    assert _codes(_lint(root), "engine/updater.py") == []


def test_a_table_of_lightning_modules_in_another_module_is_compiled_and_benchmarked_in_the_entry(
        tmp_path: Path) -> None:
    """``model = METHODS[cfg.method](cfg)`` over a dict of LightningModule classes in a package,
    handed to ``trainer.fit`` in the entry: the compile and the cuDNN choice go in the entry, where
    the model is built and fitted (issue 34)."""
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "selfsup/__init__.py": "",
        "selfsup/methods/__init__.py": ("from .simclr import SimCLR\nfrom .barlow import Barlow\n\n"
                                    "METHODS = {\"simclr\": SimCLR, \"barlow\": Barlow}\n"),
        "selfsup/methods/simclr.py": ("import lightning.pytorch as pl\nimport torch\nfrom torch import nn\n\n\n"
                                  "class SimCLR(pl.LightningModule):\n    def __init__(self, cfg):\n"
                                  "        super().__init__()\n        self.cfg = cfg\n"
                                  "        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), "
                                  "nn.AdaptiveAvgPool2d(1), nn.Flatten())\n\n"
                                  "    def training_step(self, batch, batch_idx):\n"
                                  "        return self.backbone(batch[0]).pow(2).mean()\n\n"
                                  "    def configure_optimizers(self):\n"
                                  "        return torch.optim.SGD(self.parameters(), lr=self.cfg.lr, foreach=True)\n"),
        "selfsup/methods/barlow.py": ("from .simclr import SimCLR\n\n\nclass Barlow(SimCLR):\n"
                                  "    def training_step(self, batch, batch_idx):\n"
                                  "        return self.backbone(batch[0]).abs().mean()\n"),
        "pretrain.py": ("import argparse\n\nimport lightning.pytorch as pl\n\nfrom data import make_loader\n"
                        "from selfsup.methods import METHODS\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                        "    parser.add_argument(\"--method\", default=\"simclr\")\n"
                        "    parser.add_argument(\"--lr\", type=float, default=0.3)\n    cfg = parser.parse_args()\n"
                        "    model = METHODS[cfg.method](cfg)\n"
                        "    trainer = pl.Trainer(accelerator=\"gpu\", max_epochs=100, precision=\"bf16-mixed\")\n"
                        "    trainer.fit(model, make_loader())\n\n\nif __name__ == \"__main__\":\n    main()\n"),
    })
    found = {d.code: d for d in _lint_now(root, False, "none")["pretrain.py"].diagnostics}  # type: ignore[attr-defined]
    assert found["GP303"].line == 14 and "selfsup/methods/__init__.py" in found["GP303"].message
    assert found["GP304"].line == 14 and "Trainer(benchmark=True)" in found["GP304"].message
    fixed = _lint_now(root, False, "unsafe")["pretrain.py"].fixed.decode()  # type: ignore[attr-defined]
    assert "    if torch.cuda.is_available():\n        model.compile()\n    trainer.fit(model" in fixed
    alone = {d.code for d in _lint_now(root, True, "none")["pretrain.py"].diagnostics}  # type: ignore[attr-defined]
    assert "GP303" not in alone  # nothing says it is a model without the package's facts


def test_models_built_by_type_name_and_optimizers_built_by_an_installed_library(tmp_path: Path) -> None:
    """mmcv/mmengine's shape: ``MODELS = Registry("models")`` and ``build_model(cfg)`` returning
    ``MODELS.build(cfg)`` in a builder module, the optimizer from mmcv's ``build_optimizer(model,
    cfg.optimizer)`` behind a first-party wrapper, and an installed registry's ``MODELS.build`` in a
    second script: each model trains and is never compiled (GP303). What it computes is not known
    (its class is named in a config), so GP302/GP304 stay quiet; what the optimizer is, too (GP305)."""
    root = _tree(tmp_path, {
        "setup.py": "",
        "seg/__init__.py": "",
        "seg/builder.py": ("from mmengine.registry import Registry\n\nSEGMENTORS = Registry(\"segmentor\")\n\n\n"
                           "def build_segmentor(cfg, **default_args):\n"
                           "    return SEGMENTORS.build(cfg, default_args=default_args)\n"),
        "seg/optim.py": ("from mmcv.runner import build_optimizer as mm_build_optimizer\n\n\n"
                         "def build_optimizer(model, cfg):\n    optimizer = mm_build_optimizer(model, cfg)\n"
                         "    print(len(optimizer.param_groups))\n    return optimizer\n"),
        "seg/nets.py": ("import torch.nn as nn\n\nfrom .builder import SEGMENTORS\n\n\n"
                        "@SEGMENTORS.register_module()\nclass LiteSeg(nn.Module):\n    def __init__(self, classes=19):\n"
                        "        super().__init__()\n        self.conv = nn.Conv2d(3, classes, 3)\n\n"
                        "    def forward(self, x):\n        return self.conv(x)\n"),
        "tools/train.py": ("import torch\nfrom mmengine.config import Config\n\nimport seg.nets  # noqa: F401\n"
                           "from seg.builder import build_segmentor\nfrom seg.optim import build_optimizer\n\n\n"
                           "def main(path):\n    cfg = Config.fromfile(path)\n    model = build_segmentor(cfg.model)\n"
                           "    model.cuda()\n    optimizer = build_optimizer(model, cfg.optimizer)\n"
                           "    for it in range(cfg.iters):\n"
                           "        loss = model(torch.randn(2, 3, 64, 64, device=\"cuda\")).mean()\n"
                           "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n\n\n"
                           "if __name__ == \"__main__\":\n    main(\"configs/lite.py\")\n"),
        "tools/train_det.py": ("import torch\nfrom mmcv.runner import build_optimizer\nfrom mmdet.registry import MODELS\n\n\n"
                               "def main(cfg):\n    detector = MODELS.build(cfg.model).to(\"cuda\")\n"
                               "    optim = build_optimizer(detector, cfg.optimizer)\n"
                               "    for it in range(cfg.iters):\n"
                               "        loss = sum(detector(torch.randn(2, 3, 64, 64, device=\"cuda\"), mode=\"loss\").values())\n"
                               "        optim.zero_grad()\n        loss.backward()\n        optim.step()\n"),
    })
    results = _lint_now(root, False, "none")
    for rel, name in (("tools/train.py", "model"), ("tools/train_det.py", "detector")):
        codes = _codes(results, rel)
        assert "GP303" in codes and not {"GP302", "GP304", "GP305"} & set(codes), (rel, codes)
        gp303 = next(d for d in results[rel].diagnostics if d.code == "GP303")  # type: ignore[attr-defined]
        assert f"`{name}`" in gp303.message


def test_a_hand_written_zero_grad_helper_of_another_module(tmp_path: Path) -> None:
    """Issue 34 (GP402): train.py calls, every step, a helper of ``optim_utils.py`` that fills each
    gradient with zeros by hand (``p.grad.detach_(); p.grad.zero_()``): reported at the call,
    naming the helper, with no fix; a helper that sets them to None, and the first helper called
    once before the loop, are not. Checked alone, train.py cannot tell what the helper does."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "optim_utils.py").write_text(
        "def wipe(params):\n"
        "    for p in params:\n"
        "        if p.grad is not None:\n"
        "            p.grad.detach_()\n"
        "            p.grad.zero_()\n\n\n"
        "def forget(params):\n"
        "    for p in params:\n"
        "        p.grad = None\n")
    (tmp_path / "train.py").write_text(
        "import torch\nimport optim_utils\nfrom optim_utils import forget\n\n\n"
        "def main(model, loader):\n"
        "    params = list(model.parameters())\n"
        "    opt = torch.optim.AdamW(params, fused=True)\n"
        "    optim_utils.wipe(params)\n"
        "    for x, y in loader:\n"
        "        optim_utils.wipe(params)\n"
        "        loss = (model(x.cuda(non_blocking=True)) - y.cuda(non_blocking=True)).pow(2).mean()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        forget(params)\n\n\n"
        "if __name__ == '__main__':\n    main(torch.nn.Linear(2, 2).cuda(), [])\n")
    found = [d for d in _lint(tmp_path)["train.py"].diagnostics if d.code == "GP402"]  # type: ignore[attr-defined]
    assert [d.line for d in found] == [11]
    assert "`optim_utils.wipe`" in found[0].message and found[0].no_fix_reason
    assert [d for d in _lint(tmp_path, alone=True)["train.py"].diagnostics  # type: ignore[attr-defined]
            if d.code == "GP402"] == []


def test_a_model_fed_its_batch_by_another_modules_loop() -> None:
    """Issue 34: ``model.feed_data(batch)`` in train.py's loop over a DataLoader (the model from a
    builder of the package), ``self.low = data["low"].to(self.device)`` in the model class: a copy
    every training step (the builder's product trains through ``optimize_parameters()``). The
    class fed from a queue by serve.py trains itself through its input setter: its copy is reported
    too (moves7), with no safe fix since its input's type is unknown."""
    seen = _lint(PROJECTS / "fed_models")
    copies = [d for d in seen["restorers/restore_model.py"].diagnostics if d.code == "GP104"]  # type: ignore[attr-defined]
    assert [d.line for d in copies] == [12, 14]
    assert all("every training step" in d.message for d in copies)
    stream = [d for d in seen["restorers/stream_model.py"].diagnostics if d.code == "GP104"]  # type: ignore[attr-defined]
    assert [d.line for d in stream] == [14] and "`feed_sample` feeds the inputs that `adapt` trains on" in stream[0].message
    assert all(d.fix is None or d.fix["safety"] == "unsafe" for d in stream)  # type: ignore[attr-defined]
    # a loader builder of data.py handed the device (for pin_memory) returns host batches: found
    assert _codes(seen, "pretrain.py").count("GP104") == 2


def test_models_from_a_decorator_catalogue_and_an_experiment_object() -> None:
    """Issue 34, class 1: ``catalog.make_net(cfg)`` picks a class by a configuration string from a
    table that ``@register_net`` fills in the modules the entry imports: the model is one of the
    registered classes, all convolutional, so GP304 is reported at the entry's model line naming
    them. ``net = self.recipe.get_model()`` in a runner class whose optimizer the recipe builds over
    the model it holds: GP303 at that line, naming the recipe's module."""
    seen = _lint(PROJECTS / "registered_nets")
    found = {d.code: d for d in seen["train.py"].diagnostics}  # type: ignore[attr-defined]
    assert found["GP304"].line == 13
    assert "one of GatedDenoiser, PlainDenoiser, the classes registered in zoo/denoisers.py" in found["GP304"].message
    runner = [(d.code, d.line) for d in seen["runtime/runner.py"].diagnostics]  # type: ignore[attr-defined]
    assert runner == [("GP303", 13)]
    assert _codes(seen, "run_recipe.py") == [] and _codes(seen, "runtime/recipe.py") == []
    assert "GP304" not in _codes(_lint(PROJECTS / "registered_nets", alone=True), "train.py")


def test_valid_twins_of_the_registered_nets_stay_quiet(tmp_path: Path) -> None:
    """The runner compiles what the recipe builds; a registered class that does not convolve makes
    the pick no convolutional model."""
    root = _variant(tmp_path / "compiled", "registered_nets", {
        "runtime/runner.py": ("        net.to(self.device)\n", "        net.to(self.device)\n        net.compile()\n")})
    assert "GP303" not in _codes(_lint_now(root, False, "none"), "runtime/runner.py")
    root = _variant(tmp_path / "mixed", "registered_nets", {})
    with (root / "zoo/denoisers.py").open("a") as f:
        f.write("\n\n@register_net(name=\"mlp\")\nclass PixelMLP(nn.Module):\n    def __init__(self, cfg):\n"
                "        super().__init__()\n        self.fc = nn.Linear(3, 3)\n\n    def forward(self, x):\n"
                "        return self.fc(x.transpose(1, 3)).transpose(1, 3)\n")
    assert "GP304" not in _codes(_lint_now(root, False, "none"), "train.py")
    # the recipe compiles the model it builds, in a method the runner does not call by name
    root = _variant(tmp_path / "recipe_compiles", "registered_nets", {
        "runtime/recipe.py": ("        return self.model\n",
                              "        return self.model\n\n    def compiled(self):\n"
                              "        return torch.compile(self.get_model())\n")})
    assert "GP303" not in _codes(_lint_now(root, False, "none"), "runtime/runner.py")


def test_an_output_wrapper_of_another_module_formats_what_it_is_handed(tmp_path: Path) -> None:
    """``from utils import rank0_log``: the wrapper prints on rank 0 (every step of that rank),
    so handing it a device tensor every step is GP102's; handing it a Python number is not."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "utils.py").write_text(
        "import os\n\n\ndef rank0_log(*args):\n    if int(os.environ.get('RANK', 0)) == 0:\n"
        "        print(*args, flush=True)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom utils import rank0_log\n\n\ndef fit(model, loader, opt):\n"
        "    for x, y in loader:\n        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())\n"
        "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
        "        rank0_log('loss', loss)\n        rank0_log('seen', x.shape[0])\n")
    seen = _lint(tmp_path)
    diags = [d for d in seen["train.py"].diagnostics if d.code == "GP102"]  # type: ignore[attr-defined]
    assert [d.line for d in diags] == [11]
    assert "GP102" not in _codes(_lint(tmp_path, alone=True), "train.py")


def test_per_step_work_two_and_three_calls_from_the_loop() -> None:
    """Issue 34, callers of callers: main.py's loop calls engine.fit_batch, which calls
    scoring.top1 (one module between) and objectives.total_loss, which calls
    reductions.masked_mean (two between); a base runner's validation loop hands each batch to a
    hook its subclass (another module) defines, whose metric helper syncs per batch; a batch
    source handed by keyword to another module's runner is per-step code where it is written.
    What runs once per epoch, under the step's periodic guard, or after the runner's loop is not.
    Checked alone, none of those modules reports a per-step finding (but the base runner's own
    loop, an eval loop by its hook)."""
    root = PROJECTS / "call_chains"
    alone, seen = _lint(root, alone=True), _lint(root)
    modules = ("scoring.py", "reductions.py", "runners/ranking_metrics.py", "runners/base.py", "pretrain.py")
    for module in modules[:-2]:
        assert [c for c in _codes(alone, module) if c in ("GP101", "GP104", "GP105")] == []
    # alone, pretrain.py's sampler copies rows drawn at random: reported as not ruled out (issue 34,
    # copies24), the message saying its caller was not seen; with the runner in sight, GP105's (below)
    alone_pretrain = [d for d in alone["pretrain.py"].diagnostics if d.code in ("GP101", "GP104", "GP105")]  # type: ignore
    # (and, issue 34 copies29, the loss's weights moved to where the `pred` it is handed lives: per call)
    assert sorted((d.code, d.line) for d in alone_pretrain) == [("GP104", 16), ("GP104", 17), ("GP105", 22)]
    assert all("its caller is not seen" in d.message or "its callers were not resolved" in d.message
               for d in alone_pretrain)
    by_line = {rel: {d.line: d for d in seen[rel].diagnostics} for rel in modules}  # type: ignore[attr-defined]
    assert set(by_line["scoring.py"]) == {5}  # top1; not report() (once per epoch) nor per_class() (guarded)
    assert "engine.py:17 calls `top1`" in by_line["scoring.py"][5].message
    assert by_line["reductions.py"][7].code == "GP101" and "objectives.py:8 calls `masked_mean`" in by_line["reductions.py"][7].message
    assert {d.code for d in by_line["runners/ranking_metrics.py"].values()} == {"GP101"}
    assert all("every eval batch: ranking.py:12 calls `hit_rates`" in d.message
               for d in by_line["runners/ranking_metrics.py"].values())
    assert by_line["runners/base.py"][14].code == "GP104"  # the loop hands its batch to an abstract hook
    # 22: the loss's weights, copied from a list into a CPU tensor and moved on every step (host9)
    assert {line for line, d in by_line["pretrain.py"].items() if d.code == "GP105"} == {16, 17, 22}
    assert all("step_runner.py:13 calls `sample_batch`" in by_line["pretrain.py"][line].message for line in (16, 17))
    assert "step_runner.py:14 calls `weighted_error`" in by_line["pretrain.py"][22].message
    assert not any(d.line == 27 for d in by_line["pretrain.py"].values())  # final_report: after the loop
    assert "sample_batch" not in " ".join(d.message for d in by_line["pretrain.py"].values() if d.code == "GP303")


def test_worker_counts_handed_from_options_defaulting_to_zero(tmp_path: Path) -> None:
    """Issue 34 (corpus18/19: SPADE, cgcnn, mvts): ``num_workers=int(opt.nThreads)`` of an option
    module the entry's option class extends, a loader factory's parameter the entry hands
    ``opt.workers`` (``-j/--workers`` default 0), ``config["num_workers"]`` of ``vars(opt)``: GP201
    where the loader is built, and no GP203 for a loader with no workers by default. Defaults that
    start workers keep every loader quiet."""
    seen = _lint(PROJECTS / "handed_options")
    for rel in ("data/__init__.py", "data/splits.py", "engine.py"):
        assert "GP201" in _codes(seen, rel), rel
    assert "GP203" not in _codes(seen, "data/__init__.py")
    assert _codes(_lint(PROJECTS / "handed_options", alone=True), "data/splits.py") == []
    root = _variant(tmp_path, "handed_options", {
        "options/base_options.py": ('"--nThreads", default=0', '"--nThreads", default=4')})
    text = (root / "options/base_options.py").read_text()
    (root / "options/base_options.py").write_text(text.replace('"--workers", default=0', '"--workers", default=4')
                                                  .replace('"--num_workers", type=int, default=0',
                                                           '"--num_workers", type=int, default=4'))
    quiet = _lint_now(root, False, "none")
    for rel in ("data/__init__.py", "data/splits.py", "engine.py"):
        assert "GP201" not in _codes(quiet, rel), rel
    # the entry hands the factory a literal count: its parameter is not the option
    root = _variant(tmp_path / "literal", "handed_options", {"train.py": ("num_workers=opt.workers", "num_workers=8")})
    assert "GP201" not in _codes(_lint_now(root, False, "none"), "data/splits.py")


def test_modules_of_folders_put_on_the_path(tmp_path: Path) -> None:
    """Issue 34 (corpus19: Speech-Transformer): ``from solver import Solver`` where ``src/solver/``
    has an empty ``__init__.py`` and ``solver.py`` defines ``Solver`` (path.sh puts each folder on
    PYTHONPATH): the entry sees the trainer, the model and the DataLoader subclass. A package that
    re-exports the name, or an import of a submodule, resolves as before."""
    seen = _codes(_lint(PROJECTS / "pythonpath_folders"), "src/bin/train.py")
    assert {"GP202", "GP203", "GP301", "GP302", "GP305"} <= set(seen)
    # the package's __init__ re-exports the trainer: the package it is
    root = _variant(tmp_path, "pythonpath_folders", {})
    (root / "src/solver/__init__.py").write_text("from .solver import Solver\n")
    assert "GP301" in _codes(_lint_now(root, False, "none"), "src/bin/train.py")
    # ``from solver import solver`` names the submodule: nothing to redirect
    root = _variant(tmp_path / "sub", "pythonpath_folders", {
        "src/bin/train.py": ("from solver import Solver\n", "from solver import solver\n")})
    text = (root / "src/bin/train.py").read_text().replace("solver = Solver(", "trainer = solver.Solver(") \
        .replace("solver.train()", "trainer.train()")
    (root / "src/bin/train.py").write_text(text)
    assert "GP301" in _codes(_lint_now(root, False, "none"), "src/bin/train.py")


def test_a_star_import_brings_what_the_module_re_exports(tmp_path: Path) -> None:
    """``ModuleFacts.exports``: the installed objects a star import of the module binds, through
    its own star imports of the user's modules, ``__all__`` respected, rebinding names dropped."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("from lib.tensors import *\n")
    (tmp_path / "lib" / "tensors.py").write_text(
        "import torch\nimport numpy as np\nfrom torch import nn\n\nLongTensor = torch.LongTensor\n"
        "_hidden = torch.zeros\nnp = None\n\n\ndef nn():\n    pass\n")
    (tmp_path / "cfg.py").write_text("import torch\nfrom torch import optim\n__all__ = ['optim']\n")
    main = tmp_path / "main.py"
    main.write_text("from lib import *\nfrom cfg import *\n")
    facts = project_mod.project_facts(main, main.read_bytes()).modules
    assert dict(facts["lib"].exports) == {"torch": "torch", "LongTensor": "torch.LongTensor"}
    assert dict(facts["cfg"].exports) == {"optim": "torch.optim"}


def test_a_model_class_running_its_own_forward_under_autocast_needs_none_around_it(tmp_path: Path) -> None:
    """model_autocast30: train.py builds the model from a table of the user's classes whose forwards
    run under autocast (one through a helper method returning it): no GP301 at the step. The same
    classes without it: the step is reported."""
    assert "GP301" not in {d.code for d in _lint(PROJECTS / "model_autocast30")["graphlm/train.py"].diagnostics}  # type: ignore[attr-defined]
    root = _variant(tmp_path, "model_autocast30", {
        "graphlm/models/graph.py": ("        with self.maybe_autocast():\n            out", "        if True:\n            out"),
        "graphlm/models/text.py": ('        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):', "        if True:"),
    })
    found = _lint_now(root, False, "none")["graphlm/train.py"].diagnostics  # type: ignore[attr-defined]
    assert [d.line for d in found if d.code == "GP301"] == [21]


def _found(results: dict[str, object], rel: str) -> set[tuple[int, str]]:
    return {(d.line, d.code) for d in results[rel].diagnostics}  # type: ignore[attr-defined]


def test_the_step_graph_through_a_model_the_trainer_holds(tmp_path: Path) -> None:
    """Issue 34 (step30): a base trainer's loop calls ``self.model.train_on_batch(images)``; a
    subclass in another module binds ``self.model = WGAN(...)``; ``WGAN`` inherits the method from
    ``BaseGANModel`` in a third module, which runs the whole step and calls a penalty of a fourth.
    Each module's per-step code is found, with the trainer's loop named as the caller; a method of
    the held model that runs no step (``refresh_stats``) is not made per-step through the loop."""
    results = _lint(PROJECTS / "held_step30")
    base = _found(results, "nets/base_model.py")
    assert {(15, "GP105"), (18, "GP104"), (30, "GP101")} <= base  # sample_latent, the batch copy, the loss reads
    assert (35, "GP101") not in base  # refresh_stats: the loop's pass is no step through it
    assert (6, "GP105") in _found(results, "nets/penalties.py")  # at the move line: the caller is resolved
    messages = [d.message for d in results["nets/base_model.py"].diagnostics]  # type: ignore[attr-defined]
    assert any("trainers/base_trainer.py:30 calls `BaseGANModel.train_on_batch`" in m for m in messages)
    # the trainer binds what no class of the user's modules builds: the one class of the project whose
    # method of that name runs a whole step is what the loop may run, and the finding says so (duck callers)
    root = _variant(tmp_path, "held_step30", {
        "trainers/wgan_trainer.py": ("self.model = WGAN(latent_dim=128)", "self.model = make_model('wgan')")})
    (root / "trainers/wgan_trainer.py").write_text(
        (root / "trainers/wgan_trainer.py").read_text().replace("from nets.wgan import WGAN\n",
                                                                 "from hub import make_model\n"))
    unresolved = _lint_now(root, False, "none")["nets/base_model.py"]
    assert (35, "GP101") not in _found({"b": unresolved}, "b")  # refresh_stats(images): the batch, after the step
    hedged = [d.message for d in unresolved.diagnostics if d.line == 15]  # type: ignore[attr-defined]
    assert hedged and all("is not resolved where it is called" in m for m in hedged)
    # the looping class binds it itself (no subclass): resolved in the trainer's own module
    root = _variant(tmp_path / "own", "held_step30", {
        "trainers/base_trainer.py": ("        self.model = None\n        self.build_model()\n",
                                     "        self.model = WGAN(latent_dim=128)\n")})
    text = (root / "trainers/base_trainer.py").read_text()
    (root / "trainers/base_trainer.py").write_text("from nets.wgan import WGAN\n" + text)
    assert (15, "GP105") in _found(_lint_now(root, False, "none"), "nets/base_model.py")
    # a script's own loop over an instance of the subclass: ``wgan.py`` re-exports the base's method,
    # and passes the call on to the module that defines it
    root = tmp_path / "script"
    shutil.copytree(PROJECTS / "held_step30" / "nets", root / "nets")
    (root / "pyproject.toml").write_text("")
    (root / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\nfrom nets.wgan import WGAN\n\n\n"
        "def main(dataset, epochs):\n"
        "    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)\n"
        "    model = WGAN(latent_dim=128)\n    for epoch in range(epochs):\n        for images, _ in loader:\n"
        "            model.train_on_batch(images)\n")
    results = _lint_now(root, False, "none")
    assert (15, "GP105") in _found(results, "nets/base_model.py")
    assert (6, "GP105") in _found(results, "nets/penalties.py")


def test_lightning_hooks_of_a_subclass_of_the_users_lightning_module(tmp_path: Path) -> None:
    """Issue 34 (step30): ``RaySystem(BaseSystem)`` where ``BaseSystem(pl.LightningModule)`` is in
    another module: Lightning runs its ``training_step`` per batch. Its ``validation_step`` runs
    under a period where the project's shipped Trainer settings validate every N steps
    (``val_check_interval: 5000``); without them, on every evaluation batch."""
    found = _found(_lint(PROJECTS / "lit_base30"), "systems/ray_system.py")
    assert (20, "GP101") in found and (28, "GP101") not in found
    root = _variant(tmp_path, "lit_base30", {"configs/default.yaml": ("  val_check_interval: 5000\n", "")})
    assert (28, "GP101") in _found(_lint_now(root, False, "none"), "systems/ray_system.py")


@pytest.mark.parametrize(("text", "period"), [
    ("trainer:\n  val_check_interval: 10000\n", True), ("val_check_interval: 0.25\n", False),
    ("val_check_interval: 1.0\n", False), ("check_val_every_n_epoch: 5\n", True),
    ("check_val_every_n_epoch: 1\n", False)])
def test_a_shipped_validation_period(tmp_path: Path, text: str, period: bool) -> None:
    """``lint.shipped_settings``' ``validation_period``: an integer step interval of two digits or
    more, or every N >= 2 epochs; a fraction of an epoch or every epoch is no period."""
    from gpuperf_rewrite.lint import shipped_settings

    (tmp_path / "cfg.yaml").write_text(text)
    assert ("validation_period" in shipped_settings.shipped_settings(tmp_path)) is period
