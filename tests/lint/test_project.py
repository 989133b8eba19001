"""First-party module resolution (gpuperf_rewrite.lint.project): files found as Python would
find them, never an installed package, never by running code."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuperf_rewrite.lint.project import (find_project_root, first_party_modules, imported_modules,
                                          resolve_import)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_project_root_is_the_nearest_marker_else_the_files_folder(tmp_path: Path) -> None:
    _tree(tmp_path, {"proj/pyproject.toml": "", "proj/a/b/train.py": "", "loose/x.py": ""})
    assert find_project_root(tmp_path / "proj/a/b/train.py") == tmp_path / "proj"
    assert find_project_root(tmp_path / "proj/a/b") == tmp_path / "proj"
    (tmp_path / "proj/a/.git").mkdir()
    assert find_project_root(tmp_path / "proj/a/b/train.py") == tmp_path / "proj/a"
    # no marker anywhere up to the filesystem root is unusual under tmp; the folder then
    # counts as the root only when nothing above has one
    found = find_project_root(tmp_path / "loose/x.py")
    assert found == tmp_path / "loose" or (tmp_path / "loose").is_relative_to(found)


def test_absolute_imports_from_the_files_folder_the_root_and_src(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "main.py": "",
        "engine.py": "",
        "models/__init__.py": "",
        "models/resnet.py": "",
        "scripts/train.py": "",
        "scripts/helpers.py": "",
        "src/mypkg/__init__.py": "",
        "src/mypkg/trainer.py": "",
        "nspkg/sub.py": "",
    })
    main = root / "main.py"
    assert resolve_import("engine", 0, main, root) == root / "engine.py"
    assert resolve_import("models", 0, main, root) == root / "models/__init__.py"
    assert resolve_import("models.resnet", 0, main, root) == root / "models/resnet.py"
    assert resolve_import("mypkg.trainer", 0, main, root) == root / "src/mypkg/trainer.py"
    assert resolve_import("nspkg.sub", 0, main, root) == root / "nspkg/sub.py"  # namespace package
    assert resolve_import("nspkg", 0, main, root) is None  # nothing to read in it
    # a script in a sub-folder finds its neighbours first, then the root's modules
    train = root / "scripts/train.py"
    assert resolve_import("helpers", 0, train, root) == root / "scripts/helpers.py"
    assert resolve_import("engine", 0, train, root) == root / "engine.py"
    assert resolve_import("helpers", 0, main, root) is None
    assert resolve_import("torch", 0, main, root) is None
    assert resolve_import("os.path", 0, main, root) is None


def test_a_package_wins_over_a_module_of_the_same_name(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"setup.py": "", "utils.py": "", "utils/__init__.py": ""})
    assert resolve_import("utils", 0, root / "setup.py", root) == root / "utils/__init__.py"


def test_relative_imports_read_from_the_importers_package(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "pkg/__init__.py": "",
        "pkg/train.py": "",
        "pkg/engine.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/deep.py": "",
    })
    deep = root / "pkg/sub/deep.py"
    assert resolve_import("engine", 2, deep, root) == root / "pkg/engine.py"
    assert resolve_import("", 1, deep, root) == root / "pkg/sub/__init__.py"
    assert resolve_import("", 2, deep, root) == root / "pkg/__init__.py"
    assert resolve_import("engine", 1, root / "pkg/train.py", root) == root / "pkg/engine.py"
    assert resolve_import("missing", 1, root / "pkg/train.py", root) is None


def test_never_site_packages_nor_anything_outside_the_root(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "proj/pyproject.toml": "",
        "proj/main.py": "",
        "proj/.venv/lib/python3.11/site-packages/fancy/__init__.py": "",
        "outside.py": "",
    })
    proj = root / "proj"
    venv_site = proj / ".venv/lib/python3.11/site-packages"
    # even an importer inside site-packages does not make its neighbours first-party
    assert resolve_import("fancy", 0, venv_site / "x.py", proj) is None
    assert resolve_import("outside", 0, proj / "main.py", proj) is None
    assert resolve_import("outside", 2, proj / "main.py", proj) is None


def test_from_package_import_submodule_names_both(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "main.py": "from models import resnet, build_model\nfrom . import engine\nimport utils.misc as m\n",
        "engine.py": "",
        "models/__init__.py": "def build_model(): ...\n",
        "models/resnet.py": "",
        "utils/__init__.py": "",
        "utils/misc.py": "",
    })
    found = {m.name: m.path for m in imported_modules(root / "main.py", root)}
    assert found == {
        "models": root / "models/__init__.py",
        "models.resnet": root / "models/resnet.py",
        ".engine": root / "engine.py",
        "utils.misc": root / "utils/misc.py",
    }


def test_first_party_modules_are_depth_limited_cycle_safe_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "main.py": "import torch\nimport engine\nfrom models import build_model\n",
        "engine.py": f"import utils\nimport main\nopen({str(marker)!r}, 'w')\n",  # a cycle back
        "models/__init__.py": "from .resnet import ResNet\n",
        "models/resnet.py": "from models import build_model\n",
        "utils.py": "import deeper\ntry:\n    import optional_missing\nexcept ImportError:\n    pass\n",
        "deeper.py": "def f():\n    import deepest\n",
        "deepest.py": "",
        "broken.py": "def (:\n",
    })
    mods = first_party_modules(root / "main.py")
    assert mods == [root / "engine.py", root / "models/__init__.py", root / "utils.py",
                    root / "models/resnet.py", root / "deeper.py"]
    assert root / "main.py" not in mods  # the entry, reached again through the cycle
    assert root / "deepest.py" in first_party_modules(root / "main.py", max_depth=4)
    assert first_party_modules(root / "main.py", max_depth=1) == [root / "engine.py",
                                                                   root / "models/__init__.py"]
    assert not marker.exists()
    (root / "main.py").write_text("import broken\n")
    assert first_party_modules(root / "main.py") == [root / "broken.py"]  # listed, its imports unread


def test_a_cached_result_follows_the_modules_whose_facts_it_used(tmp_path: Path, monkeypatch) -> None:
    """The lint cache keys a result on the contents of the first-party modules the file imports:
    engine.py's result (no GP401: utils.zero_grad zeroes) is not reused once utils.py stops
    zeroing, and the facts themselves are kept by content hash beside the results."""
    import shutil

    from gpuperf_rewrite.lint.api import lint_paths, load_settings
    from gpuperf_rewrite.lint.discovery import discover

    tree = tmp_path / "engine_split"
    shutil.copytree(Path(__file__).parents[1] / "rules/projects/engine_split", tree)
    monkeypatch.chdir(tree)
    settings = load_settings(isolated=True)
    found = discover(["."], settings.root, settings.exclude)

    def run():  # type: ignore[no-untyped-def]
        return lint_paths(found, settings, jobs=1, cache_dir=tree / ".gpuperf_cache")

    def codes(result, name: str) -> list[str]:  # type: ignore[no-untyped-def]
        return [d.code for d in result.diagnostics if d.path.endswith(name)]

    first, second = run(), run()
    assert "GP401" not in codes(first, "engine.py")
    assert second.parsed == 0 and second.diagnostics == first.diagnostics
    assert list((tree / ".gpuperf_cache").glob("*/facts/*/*.json"))  # facts kept by content hash
    utils = tree / "utils.py"
    utils.write_text(utils.read_text().replace("        p.grad = None", "        print(p.grad)"))
    third = run()
    assert "GP401" in codes(third, "engine.py")  # engine.py's cached result was not reused
    assert third.parsed >= 2  # engine.py and main.py (both import utils) analysed again
    assert codes(third, "main.py") == codes(first, "main.py")


def test_a_module_the_analysis_cannot_read_offers_nothing(tmp_path: Path) -> None:
    from gpuperf_rewrite.lint.engine import RuleSet, check_source
    from gpuperf_rewrite.lint.registry import all_rules

    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "broken.py": "def (:\n",
        "deep.py": "import torch\n" + "x = " + "(" * 400 + "1" + ")" * 400 + "\n",
        "main.py": "import torch\nimport broken\nimport deep\nfor x in loader:\n"
                   "    model(x).backward()\n    opt.step()\n",
    })
    res = check_source((root / "main.py").read_bytes(), "main.py", RuleSet(tuple(all_rules()), {}),
                       fs_path=str(root / "main.py"))
    assert not res.error and [d.code for d in res.diagnostics] == ["GP401"]


def test_a_checkout_without_marker_roots_above_its_package_and_a_package_copy_does_not(tmp_path: Path) -> None:
    """No project marker (a tree written from a mirror): a file in a package beside a script
    (runners/denoise.py next to main.py) is rooted at the checkout, so ``from models.net import``
    resolves; a copied package folder (no script beside it) and a site-packages copy (dist-info
    folders) stay rooted at the file's folder, so their whole package is not followed."""
    _tree(tmp_path, {"repo/main.py": "", "repo/runners/__init__.py": "", "repo/runners/denoise.py": "",
                     "repo/models/__init__.py": "", "repo/models/net.py": "",
                     "copy/pkg/__init__.py": "", "copy/pkg/sub/__init__.py": "", "copy/pkg/sub/mod.py": "",
                     "sp/six.py": "", "sp/six-1.0.dist-info/METADATA": "", "sp/lib/__init__.py": "",
                     "sp/lib/core.py": "", "repo/src/train.py": "", "repo/src/helper.py": ""})
    if find_project_root(tmp_path / "repo/main.py") != tmp_path / "repo":
        pytest.skip("a project marker above the temporary folder")
    assert find_project_root(tmp_path / "repo/runners/denoise.py") == tmp_path / "repo"
    assert resolve_import("models.net", 0, tmp_path / "repo/runners/denoise.py", tmp_path / "repo") == \
        tmp_path / "repo/models/net.py"
    assert find_project_root(tmp_path / "copy/pkg/sub/mod.py") == tmp_path / "copy/pkg/sub"
    assert find_project_root(tmp_path / "sp/lib/core.py") == tmp_path / "sp/lib"
    # ``from src.helper import`` in src/train.py (src/ is no package: rooted at src/ itself)
    src = tmp_path / "repo/src"
    assert resolve_import("src.helper", 0, src / "train.py", find_project_root(src / "train.py")) == src / "helper.py"


def test_a_namespace_package_a_script_beside_it_imports_roots_at_the_checkout(tmp_path: Path) -> None:
    """utils/train.py with no ``__init__.py``, imported as ``utils.train`` by the checkout's
    trainer.py: the program runs from the checkout, so its ``from model.model import`` resolves
    there; a folder no script imports as a package stays rooted at itself."""
    _tree(tmp_path, {"repo/trainer.py": "from utils.train import train\n", "repo/utils/train.py": "",
                     "repo/model/model.py": "", "repo/tools/plot.py": ""})
    if find_project_root(tmp_path / "repo/trainer.py") != tmp_path / "repo":
        pytest.skip("a project marker above the temporary folder")
    assert find_project_root(tmp_path / "repo/utils/train.py") == tmp_path / "repo"
    assert resolve_import("model.model", 0, tmp_path / "repo/utils/train.py", tmp_path / "repo") == \
        tmp_path / "repo/model/model.py"
    assert find_project_root(tmp_path / "repo/tools/plot.py") == tmp_path / "repo/tools"


def test_a_scripts_folder_importing_a_package_of_the_checkout_roots_at_the_checkout(tmp_path: Path) -> None:
    """scripts/train.py's ``from tab_ddpm import Diffusion`` with tab_ddpm/ in the checkout (run
    with the checkout on PYTHONPATH): rooted at the checkout; a script whose imports all resolve
    beside it (or not at all) stays rooted at its folder."""
    _tree(tmp_path, {"repo/tab_ddpm/__init__.py": "", "repo/tab_ddpm/modules.py": "",
                     "repo/scripts/train.py": "import torch\nfrom tab_ddpm import Diffusion\nfrom helpers import x\n",
                     "repo/scripts/helpers.py": "", "repo/tools/plot.py": "import numpy\nimport tab_ddpm_extra\n"})
    if find_project_root(tmp_path / "repo/tools/plot.py") != tmp_path / "repo/tools":
        pytest.skip("a project marker above the temporary folder")
    assert find_project_root(tmp_path / "repo/scripts/train.py") == tmp_path / "repo"
    assert resolve_import("tab_ddpm.modules", 0, tmp_path / "repo/scripts/train.py", tmp_path / "repo") == \
        tmp_path / "repo/tab_ddpm/modules.py"
    assert resolve_import("helpers", 0, tmp_path / "repo/scripts/train.py", tmp_path / "repo") == \
        tmp_path / "repo/scripts/helpers.py"


def test_a_module_never_imports_itself(tmp_path: Path) -> None:
    """``from model import Net`` in utils/model.py loads the root's model package, not itself."""
    _tree(tmp_path, {"pyproject.toml": "", "model/__init__.py": "", "utils/model.py": ""})
    assert resolve_import("model", 0, tmp_path / "utils/model.py", tmp_path) == tmp_path / "model/__init__.py"


def test_a_submodule_imported_from_a_package_already_imported(tmp_path: Path) -> None:
    """``from rl import algo`` then ``from rl.algo import imitation``: the second import's name is a
    submodule of a package the first already brought in; both are the file's imports."""
    (tmp_path / "pyproject.toml").write_text("")
    for rel in ("rl/__init__.py", "rl/algo/__init__.py", "rl/algo/imitation.py", "rl/storage.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    main = tmp_path / "main.py"
    main.write_text("from rl import algo, storage\nfrom rl.algo import imitation\n")
    names = [m.name for m in imported_modules(main, tmp_path)]
    assert names == ["rl", "rl.algo", "rl.storage", "rl.algo.imitation"]


@pytest.mark.parametrize("scan", [
    "import importlib, os\nfor f in os.listdir(os.path.dirname(__file__)):\n"
    "    importlib.import_module('nets.' + f[:-3])\n",
    "import importlib, pkgutil\nfor info in pkgutil.iter_modules(__path__):\n"
    "    importlib.import_module(f'{__name__}.{info.name}')\n",
    "from glob import glob\nfrom importlib import import_module\n"
    "_ = [import_module(f'nets.{p[:-3]}') for p in glob('nets/*_net.py')]\n",
])
def test_a_folder_scanned_for_runtime_imports_imports_its_modules(tmp_path: Path, scan: str) -> None:
    root = _tree(tmp_path, {
        "setup.cfg": "", "nets/__init__.py": scan, "nets/conv_net.py": "", "nets/mlp_net.py": "",
        "nets/_private.py": "", "nets/notes.txt": "",
    })
    found = {m.name: m.path for m in imported_modules(root / "nets/__init__.py", root)}
    assert found == {".conv_net": root / "nets/conv_net.py", ".mlp_net": root / "nets/mlp_net.py"}


def test_a_runtime_import_without_a_folder_listing_imports_nothing_more(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "setup.cfg": "", "nets/__init__.py": "import importlib\nmod = importlib.import_module(NAME)\n",
        "nets/conv_net.py": "",
    })
    assert imported_modules(root / "nets/__init__.py", root) == []
