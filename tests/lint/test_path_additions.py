"""Folders a script puts on sys.path (gpuperf_rewrite.lint.path_additions): its imports are looked
for there, as Python would, read off the text without running it."""

from __future__ import annotations

from pathlib import Path

from gpuperf_rewrite.lint.path_additions import path_additions
from gpuperf_rewrite.lint.project import imported_modules, is_first_party


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _names(script: Path, root: Path) -> dict[str, Path]:
    return {m.name: m.path for m in imported_modules(script, root)}


def test_a_relative_folder_appended_is_searched_from_the_scripts_folder(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"flow/pyproject.toml": "", "flow/core/flownet.py": "class FlowNet: pass\n",
                            "flow/run_flow.py": "import sys\nsys.path.append('core')\nfrom flownet import FlowNet\n"})
    assert _names(root / "flow/run_flow.py", root / "flow") == {"flownet": root / "flow/core/flownet.py"}


def test_folders_built_from_file_with_os_path_and_pathlib(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "a/lib/nets.py": "", "a/scripts/go.py":
            "import os, sys\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
            "sys.path.insert(0, os.path.join(HERE, '..', 'lib'))\nimport nets\n",
        "b/source/blocks.py": "", "b/bin/fit.py":
            "import sys\nfrom pathlib import Path\nsys.path.append(str(Path(__file__).resolve().parent.parent / 'source'))\n"
            "from blocks import Block\n",
    })
    assert path_additions(str(tmp_path / "a/scripts/go.py"), (tmp_path / "a/scripts/go.py").read_bytes()) == \
        (str(tmp_path / "a/lib"),)
    assert _names(tmp_path / "a/scripts/go.py", tmp_path / "a") == {"nets": tmp_path / "a/lib/nets.py"}
    assert _names(tmp_path / "b/bin/fit.py", tmp_path / "b") == {"blocks": tmp_path / "b/source/blocks.py"}


def test_a_path_helper_module_imported_first_and_its_add_path_function(tmp_path: Path) -> None:
    """``import _init_paths`` (tools/_init_paths.py: ``add_path(osp.join(this_dir, '..', 'lib'))``)
    in a checkout without a project marker: lib/ beside tools/ is the user's, and the root widens
    to hold it."""
    _tree(tmp_path, {
        "seg/tools/_init_paths.py": "import os.path as osp\nimport sys\n\ndef add_path(path):\n"
                                    "    if path not in sys.path:\n        sys.path.insert(0, path)\n\n"
                                    "this_dir = osp.dirname(__file__)\nadd_path(osp.join(this_dir, '..', 'lib'))\n",
        "seg/tools/train.py": "import _init_paths\nimport segnets\nfrom engine.loop import fit\n",
        "seg/lib/segnets/__init__.py": "from . import unet\n", "seg/lib/segnets/unet.py": "",
        "seg/lib/engine/__init__.py": "", "seg/lib/engine/loop.py": "",
    })
    first_party, root = is_first_party(tmp_path / "seg/tools/train.py")
    assert first_party and root == tmp_path / "seg"
    found = _names(tmp_path / "seg/tools/train.py", root)
    assert found["segnets"] == tmp_path / "seg/lib/segnets/__init__.py"
    assert found["engine.loop"] == tmp_path / "seg/lib/engine/loop.py"


def test_what_cannot_be_read_off_the_text_adds_nothing(tmp_path: Path) -> None:
    _tree(tmp_path, {"p/train.py": "import os, sys\nsys.path.append(os.environ['LIB'])\nsys.path.insert(0, args.dir)\n"
                                   "sys.path.append('missing_folder')\nimport nets\n", "p/nets_elsewhere/nets.py": ""})
    script = tmp_path / "p/train.py"
    assert path_additions(str(script), script.read_bytes()) == ()
    assert _names(script, tmp_path / "p") == {}


def test_a_folder_of_installed_code_is_never_first_party(tmp_path: Path) -> None:
    _tree(tmp_path, {"p/pyproject.toml": "", "p/.venv/lib/site-packages/torchvision/__init__.py": "",
                     "p/train.py": "import sys\nsys.path.append('.venv/lib/site-packages')\nimport torchvision\n"})
    assert _names(tmp_path / "p/train.py", tmp_path / "p") == {}


def test_the_parent_folder_by_os_path_split_and_pathlib_parents(tmp_path: Path) -> None:
    """``root_path = os.path.split(cur_path)[0]`` (the folder above the script's) and
    ``Path(__file__).resolve().parents[1]``: the checkout's root, where its packages are."""
    _tree(tmp_path, {
        "seg/core/models/zoo.py": "", "seg/core/__init__.py": "", "seg/core/models/__init__.py": "",
        "seg/scripts/train.py": "import os, sys\ncur_path = os.path.abspath(os.path.dirname(__file__))\n"
                                "root_path = os.path.split(cur_path)[0]\nsys.path.append(root_path)\n"
                                "from core.models.zoo import get_model\n",
        "gen/pkg/nets.py": "", "gen/tools/fit.py": "import sys\nfrom pathlib import Path\n"
                                                   "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))\n"
                                                   "from pkg import nets\n",
    })
    assert path_additions(str(tmp_path / "seg/scripts/train.py"), (tmp_path / "seg/scripts/train.py").read_bytes()) \
        == (str(tmp_path / "seg"),)
    assert path_additions(str(tmp_path / "gen/tools/fit.py"), (tmp_path / "gen/tools/fit.py").read_bytes()) == \
        (str(tmp_path / "gen"),)


def test_a_module_a_script_beside_it_or_above_loads_by_name_imports_from_that_scripts_path(tmp_path: Path) -> None:
    """A recipe's ``train.py`` appends the checkout's root and loads ``fullsubnet/trainer.py`` by a
    config string; the trainer imports ``audio_zen.trainer.base_trainer`` from that root."""
    _tree(tmp_path, {
        "repo/audio_zen/__init__.py": "", "repo/audio_zen/trainer/__init__.py": "",
        "repo/audio_zen/trainer/base_trainer.py": "class BaseTrainer: pass\n",
        "repo/recipes/dns/__init__.py": "",
        "repo/recipes/dns/train.py": "import os, sys\nsys.path.append(os.path.abspath(os.path.join(__file__, '..', '..', '..')))\n"
                                     "import audio_zen.loss\n\nif __name__ == '__main__':\n    pass\n",
        "repo/recipes/dns/fullsubnet/__init__.py": "",
        "repo/recipes/dns/fullsubnet/trainer.py": "from audio_zen.trainer.base_trainer import BaseTrainer\n",
    })
    trainer = tmp_path / "repo/recipes/dns/fullsubnet/trainer.py"
    first_party, root = is_first_party(trainer)
    assert first_party
    assert _names(trainer, root)["audio_zen.trainer.base_trainer"] == tmp_path / "repo/audio_zen/trainer/base_trainer.py"
