"""One project index per run (issue 34): each of the user's modules is read and its facts
computed once per run, whichever and however many files import it, shared by a run's workers
and kept on disk by content for the next run; the same results as each file checked on its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuperf_rewrite.lint import early_contexts, project_facts, project_index
from gpuperf_rewrite.lint.api import lint_paths, load_settings
from gpuperf_rewrite.lint.discovery import discover

PROJECTS = Path(__file__).parents[1] / "rules/projects"

# A training helper module that zeroes gradients through another module: a step loop calling
# it has no GP401; without its facts it would.
HELPERS = {
    "pyproject.toml": "",
    "grads.py": "def clear(params):\n    for p in params:\n        p.grad = None\n",
    "common.py": "from grads import clear\n\n\ndef reset(model):\n    clear(model.parameters())\n",
}
STEP = ("import torch\nfrom common import reset\n\n\ndef train(model, loader, opt):\n"
        "    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
        "        opt.step()\n        reset(model)\n")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(autouse=True)
def fresh_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from an empty process: nothing known, nothing counted."""
    monkeypatch.setattr(project_index, "_NODES", {})
    monkeypatch.setattr(project_index, "READS", {})
    monkeypatch.setattr(project_facts, "_FACTS_MEMO", {})
    monkeypatch.setattr(project_facts, "_CONTEXTS", {})
    monkeypatch.setattr(project_facts, "_PARSED", {})
    monkeypatch.setattr(project_facts, "COMPUTED", {})
    monkeypatch.setattr(early_contexts, "_EARLY", {})


def _lint(root: Path, monkeypatch: pytest.MonkeyPatch, jobs: int = 1, cache: Path | None = None):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(root)
    settings = load_settings(isolated=True)
    return lint_paths(discover(["."], settings.root, settings.exclude), settings, jobs=jobs, cache_dir=cache)


def _codes(run, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(d.code for d in run.diagnostics if d.path == name)


def _computed(name: str) -> int:
    return sum(n for path, n in project_facts.COMPUTED.items() if Path(path).name == name)


def _reads(name: str) -> int:
    return sum(n for path, n in project_index.READS.items() if Path(path).name == name)


def test_a_module_imported_by_many_files_is_read_and_analysed_once_per_run(tmp_path: Path, monkeypatch) -> None:
    root = _tree(tmp_path, {**HELPERS, **{f"train_{i}.py": STEP for i in range(6)}})
    run = _lint(root, monkeypatch)
    assert all("GP401" not in _codes(run, f"train_{i}.py") for i in range(6))  # the facts were used
    assert all("GP301" in _codes(run, f"train_{i}.py") for i in range(6))  # and the files were checked
    # common.py is imported by six checked files, grads.py by common.py: each read and analysed once
    assert _computed("common.py") == 1 and _computed("grads.py") == 1
    assert _reads("common.py") == 1 and _reads("grads.py") == 1
    # a second run in the same process reads them again (they may have changed), analyses neither
    _lint(root, monkeypatch)
    assert _reads("common.py") == 2 and _computed("common.py") == 1


def test_the_store_on_disk_serves_the_next_run_until_a_module_it_reaches_changes(tmp_path: Path,
                                                                                monkeypatch) -> None:
    root = _tree(tmp_path / "proj", {**HELPERS, "train.py": STEP, "other.py": STEP.replace("train", "fit")})
    cache = tmp_path / "cache"
    first = _lint(root, monkeypatch, cache=cache)
    assert "GP401" not in _codes(first, "train.py") and _computed("common.py") == 1
    monkeypatch.setattr(project_facts, "_FACTS_MEMO", {})  # a new process: only the disk remains
    monkeypatch.setattr(project_facts, "COMPUTED", {})
    (root / "train.py").write_text(STEP + "\n# edited\n")  # not answered by the lint cache
    second = _lint(root, monkeypatch, cache=cache)
    assert _codes(second, "train.py") == _codes(first, "train.py")
    assert project_facts.COMPUTED == {}  # every module's facts read back from the store
    # grads.py, two imports away from train.py, stops zeroing: common.py's facts are stale too
    (root / "grads.py").write_text("def clear(params):\n    for p in params:\n        print(p.grad)\n")
    (root / "train.py").write_text(STEP + "\n# edited again\n")
    third = _lint(root, monkeypatch, cache=cache)
    assert "GP401" in _codes(third, "train.py")
    assert _computed("grads.py") == 1 and _computed("common.py") == 1


@pytest.mark.parametrize("project", ["engine_split", "src_layout", "trainer_class"])
def test_the_same_findings_as_each_file_checked_in_a_fresh_process(tmp_path: Path, monkeypatch,
                                                                    project: str) -> None:
    from gpuperf_rewrite.lint.engine import check_source
    from gpuperf_rewrite.lint.prefilter import RuleSet
    from gpuperf_rewrite.lint.registry import all_rules

    root = tmp_path / project
    shutil.copytree(PROJECTS / project, root)
    together = _lint(root, monkeypatch)
    alone = []
    for path in sorted(root.rglob("*.py")):
        for state in (project_index._NODES, project_facts._FACTS_MEMO, project_facts._PARSED):
            state.clear()
        name = path.relative_to(root).as_posix()
        alone.extend(check_source(path.read_bytes(), name, RuleSet(tuple(all_rules()), {}), fs_path=str(path))
                     .diagnostics)
    def rows(found):  # type: ignore[no-untyped-def]
        return sorted((d.path, d.line, d.column, d.code, d.message) for d in found)

    assert together.diagnostics and rows(together.diagnostics) == rows(alone)


def test_workers_share_the_facts_and_find_what_one_process_finds(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    root = _tree(tmp_path / "proj", {**HELPERS, **{f"train_{i:02}.py": STEP for i in range(20)}})
    (root / "train_03.py").write_text(STEP.replace("        reset(model)\n", ""))  # a real GP401
    one = _lint(root, monkeypatch, jobs=1)
    two = _lint(root, monkeypatch, jobs=2)
    assert [d.__dict__ for d in two.diagnostics] == [d.__dict__ for d in one.diagnostics]
    assert _codes(two, "train_03.py").count("GP401") == 1
    assert not list((tmp_path / "tmp").iterdir())  # the run's store is gone


def test_an_import_cycle_gives_the_same_facts_whichever_file_comes_first(tmp_path: Path) -> None:
    """``models/__init__`` imports ``models.resnet``, which imports the package back: the models'
    facts reach the entry script whichever module the index met first."""
    files = {
        "pyproject.toml": "",
        "models/__init__.py": "from .resnet import ResNet, build\n",
        "models/resnet.py": "import torch\nfrom torch import nn\nfrom . import layers\nimport models\n\n\n"
                            "class ResNet(nn.Module):\n    def forward(self, x):\n        return layers.conv(x)\n\n\n"
                            "def build():\n    return ResNet()\n",
        "models/layers.py": "import torch\n\n\ndef conv(x):\n    return torch.nn.functional.conv2d(x, x)\n",
        "main.py": "import models\n",
        "side.py": "from models import resnet\n",
    }
    root = _tree(tmp_path, files)
    seen = []
    for order in (["main.py", "side.py"], ["side.py", "main.py"]):
        for state in (project_index._NODES, project_facts._FACTS_MEMO):
            state.clear()
        got = {}
        for name in order:
            got[name] = project_facts.project_facts(root / name, (root / name).read_bytes()).modules
        seen.append(got)
    assert seen[0] == seen[1]
    assert "conv" in seen[0]["main.py"]["models"].workload
    assert seen[0]["side.py"]["models.resnet"].functions["build"].returns_model


def test_a_chain_of_imports_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    import sys

    n = sys.getrecursionlimit() + 50
    files = {"pyproject.toml": "", **{f"m{i}.py": f"import m{i + 1}\n" for i in range(n)},
             f"m{n}.py": "import torch\n\n\ndef clear(opt):\n    opt.zero_grad()\n"}
    root = _tree(tmp_path, files)
    got = project_facts.project_facts(root / "m0.py", (root / "m0.py").read_bytes())
    assert set(got.modules) == {"m1"} and got.key


def test_facts_read_through_a_chain_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    """Each module's facts read with its import's (a setting made on import travels up): past the
    stack's depth the rest of the chain is read children first, not cut off."""
    import sys

    n = sys.getrecursionlimit() + 50
    files = {"pyproject.toml": "", **{f"m{i}.py": f"import m{i + 1}\n" for i in range(n)},
             f"m{n}.py": "import torch\n\ntorch.backends.cudnn.benchmark = True\n"}
    root = _tree(tmp_path, files)
    got = project_facts.project_facts(root / "m0.py", (root / "m0.py").read_bytes())
    assert got.modules["m1"].settings == frozenset({"cudnn"})


def test_installed_packages_are_never_followed(tmp_path: Path) -> None:
    """A package linted where it is installed, with no project marker above it: its files import
    each other, and none of that is followed."""
    pkg = _tree(tmp_path / "lib/python3.11/site-packages/pkg", {
        "__init__.py": "from .train import fit\n",
        "train.py": "import torch\nfrom .helpers import clear\n",
        "helpers.py": "def clear(opt):\n    opt.zero_grad()\n",
    })
    for name in ("__init__.py", "train.py"):
        assert project_facts.project_facts(pkg / name, (pkg / name).read_bytes()).modules == {}
        assert project_index.dependency_key(pkg / name, (pkg / name).read_bytes()) == ""
    assert project_index.READS == {}


def test_a_cached_result_is_keyed_on_every_module_the_file_reaches(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**HELPERS, "train.py": STEP})
    data = (root / "train.py").read_bytes()
    before = project_index.dependency_key(root / "train.py", data)
    assert before and project_index.dependency_key(root / "train.py", data) == before
    (root / "grads.py").write_text("def clear(params):\n    pass\n")  # two imports away
    assert project_index.dependency_key(root / "train.py", data) not in ("", before)


def _ring(n: int) -> dict[str, str]:
    """A package whose ``__init__`` imports ``n`` modules, each importing the next through the
    package (one import cycle of n + 1 modules), a small cycle beside it (``models`` <->
    ``models.vae``) and a chain below: a step, a model and a zeroing helper somewhere along."""
    files = {"pyproject.toml": "", "pkg/__init__.py": "".join(f"from . import m{i:02}\n" for i in range(n)),
             "models/__init__.py": "from .vae import VAE, build_vae\n",
             "models/vae.py": "import torch\nimport models\nfrom helpers import clear\n\n\n"
                              "class VAE(torch.nn.Module):\n    def forward(self, x):\n"
                              "        return torch.nn.functional.conv2d(x, x)\n\n\n"
                              "def build_vae():\n    return VAE()\n\n\ndef reset(opt):\n    clear(opt)\n",
             "helpers.py": "import deep\n\n\ndef clear(opt):\n    deep.clear(opt)\n",
             "deep.py": "def clear(opt):\n    opt.zero_grad()\n"}
    for i in range(n):
        j = (i + 1) % n
        body = f"def step_{i}(model, opt, x):\n    m{j:02}.step_{j}(model, opt, x)\n\n\n" \
               f"def build_{i}():\n    return m{j:02}.build_{j}()\n"
        if i == n // 2:
            body = ("def step_{0}(model, opt, x):\n    model(x).sum().backward()\n    opt.step()\n\n\n"
                    "def build_{0}():\n    return models.VAE()\n\n\ndef zero_{0}(opt):\n    models.vae.reset(opt)\n"
                    ).format(i)
        files[f"pkg/m{i:02}.py"] = f"import torch\nimport models\nimport models.vae\nfrom pkg import m{j:02}\n\n\n{body}"
    return files


@pytest.mark.parametrize("size", [5, 40])  # a small cycle (read twice) and a large one (once)
def test_facts_computed_when_asked_are_those_of_the_whole_graph_read_children_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Each module's facts are computed only when an importer's analysis asks for them; they are
    the facts the whole graph gives read children first (the reading kept for import chains
    deeper than the stack), whatever module was asked for first."""
    root = _tree(tmp_path, {**_ring(size), "main.py": "import pkg\nimport models\n"})
    paths = sorted(str(p) for p in root.rglob("*.py") if p.name != "main.py")

    def facts(order: list[str]) -> dict[str, object]:
        for state in (project_index._NODES, project_facts._FACTS_MEMO, project_facts._PARSED):
            state.clear()
        out = {}
        with project_index.run_scope():
            for path in order:
                n = project_index.node(path, str(root))
                assert n is not None
                project_index.keyed([n])
                out[path] = project_facts.facts_of_node(n).to_json()
        return out

    lazy = facts(paths)
    assert facts(paths[::-1]) == lazy  # the order asked does not matter
    monkeypatch.setattr(project_facts, "_NEST_FRAMES", 0)  # every module children first
    assert facts(paths) == lazy
    step = lazy[str(root / f"pkg/m{size // 2:02}.py")]
    assert step["functions"][f"step_{size // 2}"]["trains"] and step["workload"] == ["conv"]  # type: ignore[index]
    assert lazy[str(root / "helpers.py")]["functions"]["clear"]["zeroes_grads"]  # type: ignore[index]


def test_a_script_importing_one_module_of_a_large_cycle_costs_what_its_facts_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package's ``__init__`` is first in path order: the cycle's other modules are read for
    it only with their imports outside the cycle, so the script's facts analyse each module of
    the cycle once, not twice (diffusers' example scripts: 992 modules in one cycle)."""
    root = _tree(tmp_path, {**_ring(40), "train.py": "import pkg\n\npkg.m00.step_0(None, None, None)\n"})
    got = project_facts.project_facts(root / "train.py", (root / "train.py").read_bytes())
    assert got.modules["pkg"].workload == frozenset({"conv"})
    ring = [n for path, n in project_facts.COMPUTED.items() if Path(path).parent.name == "pkg"]
    assert len(ring) == 41 and set(ring) == {1}  # each module's own reading, no second one


@pytest.mark.parametrize("project", ["step_helpers", "ddp_engine", "engine_split"])
def test_an_importers_step_calls_alone_are_those_of_its_facts(tmp_path: Path, project: str) -> None:
    """``step_callers`` reads only an importer's step calls (not the facts of its functions):
    the same calls as its whole facts give, computed when they are not known."""
    root = tmp_path / project
    shutil.copytree(PROJECTS / project, root)
    paths = sorted(str(p) for p in root.rglob("*.py"))

    def read(whole: bool) -> dict[str, tuple[object, ...]]:
        for state in (project_index._NODES, project_facts._FACTS_MEMO, project_facts._PARSED):
            state.clear()
        out = {}
        with project_index.run_scope():
            for path in paths:
                n = project_index.node(path, str(root))
                assert n is not None
                project_index.keyed([n])
                out[path] = tuple(project_facts.facts_of_node(n).step_calls) if whole else \
                    project_facts.step_calls_of_node(n)
        return out

    alone = read(False)
    assert alone == read(True)
    assert any(alone.values()) or project != "step_helpers"  # train.py's loop calls its helpers


# A loss helper whose host read runs on every step of train.py's loop: losses.py is checked first
# (train.py imports it), and its check asks for train.py's step calls, which need an analysis of
# train.py before train.py's own check.
LOSS_HELPER = {
    "pyproject.toml": "",
    "losses.py": "import torch\n\n\ndef total(out, y):\n    return (out - y).abs().mean().item()\n",
    "train.py": ("import torch\nfrom losses import total\n\n\ndef fit(model, loader, opt):\n"
                 "    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
                 "        opt.step()\n        print(total(model(x), y))\n"),
}


def test_a_module_analysed_before_its_check_is_not_analysed_again(tmp_path: Path, monkeypatch) -> None:
    from gpuperf_rewrite.rules.analysis.model import training

    built: list[str] = []
    init = training.TrainingAnalysis.__init__

    def counting(self, ctx):  # type: ignore[no-untyped-def]
        built.append(Path(ctx.path).name)
        init(self, ctx)

    monkeypatch.setattr(training.TrainingAnalysis, "__init__", counting)
    root = _tree(tmp_path / "proj", LOSS_HELPER)
    run = _lint(root, monkeypatch)
    assert "GP101" in _codes(run, "losses.py")  # train.py's step calls were read
    assert sorted(built) == ["losses.py", "train.py"]  # train.py's check took its context over
    # nothing kept: train.py is analysed for its step calls, losses.py for the facts they are read
    # with, then each again for its own check
    monkeypatch.setattr(early_contexts, "_KEEP", 0)
    monkeypatch.setattr(project_facts, "_FACTS_MEMO", {})
    built.clear()
    again = _lint(root, monkeypatch)
    assert sorted(built) == ["losses.py", "losses.py", "train.py", "train.py"]
    assert [d.__dict__ for d in again.diagnostics] == [d.__dict__ for d in run.diagnostics]


def test_a_context_that_read_what_the_check_sets_is_not_taken_over() -> None:
    import libcst as cst

    text = "import torch\n"
    ctx = early_contexts._early_class()(cst.parse_module(text), text, "/p/m.py", None)
    ctx.launch, ctx.options = None, {}
    assert not ctx.read_early
    assert ctx.launch is None and ctx.read_early  # read before the check set it
    ctx.adopt("m.py")
    assert ctx.path == "m.py" and ctx.options == {}


def test_a_module_deep_in_a_large_repository_still_finds_the_loop_calling_it(tmp_path: Path, monkeypatch) -> None:
    """The importers of a module are looked for in the project's files, a bounded list: in a
    repository with more files than the bound before the project's folder (a monorepo, a test
    suite's fixtures), the folders leading to the module come first, so its entry is still seen."""
    from gpuperf_rewrite.lint import launch, project_files, step_callers

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mono'\n")
    for i in range(12):  # listed before ``zprojects/`` in walk order
        (tmp_path / "aaa").mkdir(exist_ok=True)
        (tmp_path / "aaa" / f"m{i}.py").write_text("x = 1\n")
    root = tmp_path / "zprojects" / "step_helpers"
    shutil.copytree(PROJECTS / "step_helpers", root)
    (root / "pyproject.toml").unlink()  # the repository's root is the project root
    monkeypatch.setattr(project_files, "MAX_SCANNED", 8)
    for state in (project_files._FILES, launch._RUN_INFOS, step_callers._MEMO, step_callers._IMPORTERS):
        state.clear()
    losses = root / "losses.py"
    with project_index.run_scope():
        callers = step_callers.step_callers(losses, losses.read_bytes(), tmp_path)
    assert any(c.function.startswith("MaskedL1") for c in callers), callers
