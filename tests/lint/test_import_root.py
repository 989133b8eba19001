"""A checkout without a project marker (no .git, pyproject.toml, setup.py: a tarball, a copy of
the sources) runs from the folder its scripts' imports name: ``PYTHONPATH=src python
src/runs/pretrain.py`` imports ``vlcore.model`` from src/vlcore/. The root is widened to hold
the packages a file imports, so their modules are first-party and their facts are read."""

from __future__ import annotations

from pathlib import Path

from gpuperf_rewrite.lint.project import find_project_root, first_party_modules


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_script_in_a_subfolder_runs_from_the_folder_that_holds_its_packages(tmp_path: Path) -> None:
    _write(tmp_path / "checkout", {
        "src/runs/pretrain.py": "from vlcore.model import Net\nfrom settings import args\nnet = Net()\n",
        "src/vlcore/__init__.py": "",
        "src/vlcore/model.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
        "src/settings.py": "args = None\n",
    })
    script = tmp_path / "checkout/src/runs/pretrain.py"
    assert find_project_root(script) == tmp_path / "checkout/src"
    found = {p.relative_to(tmp_path / "checkout").as_posix() for p in first_party_modules(script)}
    assert {"src/vlcore/model.py", "src/settings.py"} <= found


def test_a_recipe_three_levels_down_imports_the_toolkit_at_the_top(tmp_path: Path) -> None:
    _write(tmp_path / "checkout", {
        "recipes/noise/suppress/trainer.py": "import audiokit.loss\nfrom audiokit.trainer import Base\n",
        "audiokit/loss.py": "def l1(a, b):\n    return (a - b).abs().mean()\n",
        "audiokit/trainer.py": "class Base:\n    pass\n",  # a namespace package: no __init__.py
    })
    script = tmp_path / "checkout/recipes/noise/suppress/trainer.py"
    assert find_project_root(script) == tmp_path / "checkout"
    found = {p.relative_to(tmp_path / "checkout").as_posix() for p in first_party_modules(script)}
    assert {"audiokit/loss.py", "audiokit/trainer.py"} <= found


def test_installed_names_never_widen_the_root(tmp_path: Path) -> None:
    # A package with its own ``torch/`` subpackage: ``import torch.optim`` is still the installed torch.
    _write(tmp_path / "lib", {
        "algos/torch/__init__.py": "",
        "algos/torch/optim.py": "",
        "algos/impl/sac.py": "import torch.optim\nimport json\nfrom helpers import clip\n",
        "algos/impl/helpers.py": "def clip(x):\n    return x\n",
    })
    script = tmp_path / "lib/algos/impl/sac.py"
    assert find_project_root(script) == tmp_path / "lib/algos/impl"
