"""Modules a package imports by a name it builds at run time from a literal prefix
(gpuperf_rewrite.lint.project): every module of that package the name can be is an import."""

from __future__ import annotations

from pathlib import Path

from gpuperf_rewrite.lint.project import imported_modules


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_prefix_and_suffix_held_in_a_name_pick_the_packages_matching_modules(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "solvers/__init__.py": "import importlib\n\ndef find(kind):\n    filename = 'solvers.' + kind + '_solver'\n"
                               "    return importlib.import_module(filename)\n",
        "solvers/gan_solver.py": "", "solvers/vae_solver.py": "", "solvers/helpers.py": "",
    })
    got = {m.name: m.path for m in imported_modules(root / "solvers/__init__.py", root)}
    assert got == {".gan_solver": root / "solvers/gan_solver.py", ".vae_solver": root / "solvers/vae_solver.py"}


def test_f_strings_percent_formats_and_dunder_import_from_a_script(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "train.py": "import importlib\nnet = importlib.import_module(f'archs.{cfg.arch}').Net()\n"
                    "head = __import__('heads.%s' % cfg.head, fromlist=['Head'])\n",
        "archs/__init__.py": "", "archs/resnet.py": "", "archs/vit.py": "",
        "heads/__init__.py": "", "heads/linear.py": "",
    })
    got = {m.name for m in imported_modules(root / "train.py", root)}
    assert got == {"archs.resnet", "archs.vit", "heads.linear"}


def test_a_prefix_that_names_no_package_of_the_user_imports_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"pyproject.toml": "", "solvers.py": "",
                            "train.py": "import importlib\nm = importlib.import_module('torchvision.models.' + name)\n"
                                        "s = importlib.import_module('solvers.' + name)\n"})
    assert imported_modules(root / "train.py", root) == []


def test_a_dotted_tail_after_the_computed_part_names_that_module_in_every_subpackage(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "pyproject.toml": "",
        "train.py": "import importlib\nA = importlib.import_module('zoo.{}.net'.format(cfg.name))\n"
                    "B = importlib.import_module(f'heads.{cfg.head}.head')\n"
                    "C = importlib.import_module('necks.' + cfg.neck + '.neck')\n"
                    "D = __import__('cores.%s.core' % cfg.core, fromlist=['Core'])\n",
        "zoo/__init__.py": "", "zoo/unet/net.py": "", "zoo/unet/blocks.py": "", "zoo/vit/net.py": "",
        "zoo/_private/net.py": "",
        "heads/linear/head.py": "", "heads/mlp/other.py": "",  # a namespace package (no __init__.py)
        "necks/__init__.py": "", "necks/fpn/neck.py": "", "cores/__init__.py": "", "cores/gru/core.py": "",
    })
    got = {m.name for m in imported_modules(root / "train.py", root)}
    assert got == {"zoo.unet.net", "zoo.vit.net", "heads.linear.head", "necks.fpn.neck", "cores.gru.core"}
