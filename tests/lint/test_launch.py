"""How the project runs a checked file (issue 34): a loader module's workers fix decided by the
guard of the scripts importing it, and the flags the project's own launch scripts pass read like
the command-line flags the rules name (lint/launch.py)."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli

DATA = dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    def build_loader(batch_size):
        ds = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
        return DataLoader(ds, batch_size=batch_size, shuffle=True)
""")
GUARDED_MAIN = dedent("""\
    import torch

    import data


    def main():
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in data.build_loader(32):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


    if __name__ == "__main__":
        main()
""")
# The same work at import time: a spawned worker re-imports it and starts the loader again.
UNGUARDED_MAIN = GUARDED_MAIN.replace('if __name__ == "__main__":\n    main()', "main()")


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _lint(path: Path, *extra: str) -> list[dict]:
    r = CliRunner().invoke(cli, [str(path), "--no-cache", "--output-format", "json", *extra])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def _gp201(path: Path) -> dict:
    (finding,) = [d for d in _lint(path, "--select", "GP201") if d["code"] == "GP201"]
    return finding


def test_a_loader_module_imported_by_a_guarded_script_gets_the_workers_fix(tmp_path) -> None:
    root = _project(tmp_path, {"data.py": DATA, "main.py": GUARDED_MAIN})
    finding = _gp201(root / "data.py")
    assert finding["fix"] is not None and finding.get("no_fix_reason") is None
    r = CliRunner().invoke(cli, [str(root / "data.py"), "--no-cache", "--fix", "--unsafe-fixes",
                                 "--select", "GP201,GP203"])
    assert r.exit_code in (0, 1), r.output
    fixed = (root / "data.py").read_text()
    assert "num_workers=min(8, os.cpu_count() or 1)" in fixed and "persistent_workers" in fixed


def test_through_a_second_module_and_from_a_subfolder(tmp_path) -> None:
    """main.py imports engine.py, which imports pkg/data.py: main.py's guard is the one that counts."""
    engine = "from pkg import data\n\n\ndef loaders():\n    return data.build_loader(16)\n"
    main = GUARDED_MAIN.replace("import data\n", "import engine\n").replace("data.build_loader(32)", "engine.loaders()")
    root = _project(tmp_path, {"pkg/__init__.py": "", "pkg/data.py": DATA, "engine.py": engine, "main.py": main})
    assert _gp201(root / "pkg" / "data.py")["fix"] is not None


@pytest.mark.parametrize("case", ["unguarded", "calls_at_import", "alone"])
def test_no_fix_when_no_entry_keeps_the_loader_under_its_guard(tmp_path, case) -> None:
    files = {"data.py": DATA}
    if case == "unguarded":
        files["train.py"] = UNGUARDED_MAIN
    elif case == "calls_at_import":  # the loader is built when main.py is imported, guard or not
        files["main.py"] = GUARDED_MAIN.replace("\n\ndef main():", "\nLOADER = data.build_loader(8)\n\n\ndef main():")
    root = _project(tmp_path, files)
    finding = _gp201(root / "data.py")
    assert finding["fix"] is None
    reason = finding["no_fix_reason"]
    assert {"unguarded": "train.py, which imports this module, has no `if __name__ == \"__main__\":` guard",
            "calls_at_import": "main.py, which imports this module, calls into it at import time",
            "alone": "no script of the project that imports it was found"}[case] in reason
    assert "spawn" in reason


def test_a_test_module_importing_the_loader_module_is_not_an_entry(tmp_path) -> None:
    test = "import data\n\nfor x, y in data.build_loader(4):\n    break\n"
    root = _project(tmp_path, {"data.py": DATA, "main.py": GUARDED_MAIN, "tests/test_data.py": test})
    assert _gp201(root / "data.py")["fix"] is not None


def test_the_cache_sees_the_entry_change(tmp_path) -> None:
    """A result cached while main.py guarded its work is not reused once it no longer does."""
    root = _project(tmp_path, {"data.py": DATA, "main.py": GUARDED_MAIN})
    cache = ["--cache-dir", str(tmp_path / ".cache"), "--select", "GP201", "--output-format", "json"]
    first = json.loads(CliRunner().invoke(cli, [str(root / "data.py"), *cache]).stdout)
    assert first[0]["fix"] is not None
    (root / "main.py").write_text(UNGUARDED_MAIN)
    second = json.loads(CliRunner().invoke(cli, [str(root / "data.py"), *cache]).stdout)
    assert second[0]["fix"] is None and "main.py" in second[0]["no_fix_reason"]


# ---- launch scripts ------------------------------------------------------------------------------

HF_TRAIN = dedent("""\
    from dataclasses import dataclass, field

    import transformers
    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="gpt2")


    def train():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        trainer = Trainer(model=model, args=training_args, train_dataset=make_dataset())
        trainer.train()


    if __name__ == "__main__":
        train()
""")
TORCHRUN = dedent("""\
    #!/bin/bash
    # fine-tune on 4 GPUs
    torchrun --nproc_per_node=4 --master_port=29500 train.py \\
        --model_name_or_path "$MODEL" \\
        --output_dir ./out \\
        --bf16 True \\
        --tf32 True \\
        --dataloader_num_workers 4 \\
        --per_device_train_batch_size 4 2>&1 | tee log.txt
""")


def _codes(path: Path, select: str) -> list[str]:
    return sorted(d["code"] for d in _lint(path, "--select", select))


def test_hf_flags_passed_by_the_project_s_launch_script_are_not_reported(tmp_path) -> None:
    root = _project(tmp_path, {"train.py": HF_TRAIN, "scripts/finetune.sh": TORCHRUN})
    assert _codes(root / "train.py", "GP201,GP301,GP302") == []


def test_a_launch_script_without_the_flags_leaves_the_findings(tmp_path) -> None:
    plain = "python train.py --output_dir out --bf16 False --dataloader_num_workers=0\n"
    root = _project(tmp_path, {"train.py": HF_TRAIN, "run.sh": plain,
                               "scripts/other.sh": TORCHRUN.replace("train.py", "other_train.py")})
    assert _codes(root / "train.py", "GP201,GP301,GP302") == ["GP201", "GP301", "GP302"]


@pytest.mark.parametrize("command", [
    "accelerate launch --num_processes 2 train.py --fp16 --tf32 true --dataloader_num_workers=8",
    "deepspeed --num_gpus 8 ${ROOT}/train.py --deepspeed ds.json --bf16 --tf32 --dataloader-num-workers 2",
    "python -m torch.distributed.run --nproc_per_node 8 train.py --bf16=True --tf32=True --dataloader_num_workers 4",
    "CUDA_VISIBLE_DEVICES=0 python -m src.train --fp16 True --tf32 True --dataloader_num_workers 2",
])
def test_launchers_and_flag_spellings(tmp_path, command) -> None:
    where = "src/train.py" if "src.train" in command else "train.py"
    root = _project(tmp_path, {where: HF_TRAIN, "train.sh": "#!/bin/sh\nset -e\n" + command + "\n"})
    assert _codes(root / where, "GP201,GP301,GP302") == []


def test_a_launch_of_another_file_with_the_same_name_does_not_count(tmp_path) -> None:
    root = _project(tmp_path, {"train.py": HF_TRAIN, "other/train.py": HF_TRAIN,
                               "other/run.sh": "cd other && python other/train.py --bf16 True\n"})
    assert "GP301" in _codes(root / "train.py", "GP301")
    assert _codes(root / "other" / "train.py", "GP301") == []


def test_the_cache_sees_a_changed_launch_script(tmp_path) -> None:
    root = _project(tmp_path, {"train.py": HF_TRAIN, "run.sh": "python train.py --output_dir o\n"})
    cache = ["--cache-dir", str(tmp_path / ".cache"), "--select", "GP301", "--output-format", "json"]
    assert [d["code"] for d in json.loads(CliRunner().invoke(cli, [str(root / "train.py"), *cache]).stdout)] == ["GP301"]
    (root / "run.sh").write_text("python train.py --output_dir o --bf16 True\n")
    assert json.loads(CliRunner().invoke(cli, [str(root / "train.py"), *cache]).stdout) == []


OPT_IN_AMP = dedent("""\
    import argparse

    import torch

    from helpers import precision_context

    parser = argparse.ArgumentParser()
    parser.add_argument("--use-amp", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    scope = precision_context(args.use_amp)
    for x, y in loader:
        with scope:
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
""")


def test_opt_in_amp_turned_on_by_the_launch_script_is_not_reported(tmp_path) -> None:
    root = _project(tmp_path, {"train.py": OPT_IN_AMP, "scripts/run.sh": "torchrun --nproc_per_node 8 train.py --use_amp\n"})
    assert _codes(root / "train.py", "GP301") == []
    (root / "scripts" / "run.sh").write_text("python train.py --epochs 3\n")
    (note,) = _lint(root / "train.py", "--select", "GP301")
    assert note["severity"] == "info" and "opt-in" in note["message"] and "--use-amp" in note["message"]


def test_a_launch_of_the_script_importing_the_file_counts(tmp_path) -> None:
    """The launch runs a thin entry (``train_mem.py``: a patch, then ``train()``) that imports the
    file whose parser reads the flags."""
    entry = "from pkg.train import train\n\nif __name__ == '__main__':\n    train()\n"
    root = _project(tmp_path, {"pkg/__init__.py": "", "pkg/train.py": HF_TRAIN, "pkg/train_mem.py": entry,
                               "scripts/sft.sh": TORCHRUN.replace("train.py", "pkg/train_mem.py")})
    assert _codes(root / "pkg" / "train.py", "GP201,GP301,GP302") == []
    (root / "scripts" / "sft.sh").write_text(TORCHRUN.replace("train.py", "pkg/other.py"))
    assert _codes(root / "pkg" / "train.py", "GP201,GP301,GP302") == ["GP201", "GP301", "GP302"]


LIGHTNING_CLI = dedent("""\
    import lightning as L
    from lightning.pytorch.cli import LightningCLI


    class Net(L.LightningModule):
        def training_step(self, batch, batch_idx):
            return self.layer(batch).mean()


    if __name__ == "__main__":
        LightningCLI(Net)
""")


@pytest.mark.parametrize(("precision", "reported"), [("bf16-mixed", False), ("32-true", True)])
def test_lightning_cli_precision_from_the_launch_script(tmp_path, precision, reported) -> None:
    root = _project(tmp_path, {"cli.py": LIGHTNING_CLI,
                               "run.sh": f"python cli.py fit --trainer.precision {precision} --trainer.devices 4\n"})
    assert ("GP301" in _codes(root / "cli.py", "GP301")) is reported


def test_the_importer_search_gives_one_answer_whatever_was_read_before(tmp_path, monkeypatch) -> None:
    """The search's budget counts every file it needs, read before or not: with two workers, which
    worker checked which file first must not change a finding (the answer was "unknown" cold and
    known once another search had cached the same files)."""
    from gpuperf_rewrite.lint import launch

    monkeypatch.setattr(launch, "MAX_PARSED", 3)
    for name in ("helpers", "shared"):
        (tmp_path / f"{name}.py").write_text("X = 1\n")
    for i in range(5):
        (tmp_path / f"job{i}.py").write_text("import helpers\nimport shared\n")

    def reaching(module: str, warm: bool) -> frozenset | None:
        launch._DIRECT.clear()
        launch._REACHING.clear()
        if warm:  # another search read every importer first, as another file's check in this process
            monkeypatch.setattr(launch, "MAX_PARSED", 100)
            assert launch._reaching(tmp_path / "shared.py", tmp_path) is not None
            monkeypatch.setattr(launch, "MAX_PARSED", 3)
        return launch._reaching(tmp_path / module, tmp_path)

    assert reaching("helpers.py", warm=False) is None  # five importers to read, three allowed: unknown
    assert reaching("helpers.py", warm=True) is None


def test_a_file_seen_from_two_roots_resolves_its_imports_from_each(tmp_path) -> None:
    """One file read first from a folder above its project (a monorepo, or several projects linted
    in one run), where ``from trainpkg import loop`` names nothing, then from its own project (a
    src layout): the second answer is its own, not the first one remembered (the entry scripts of
    ``loop.py`` were lost, and with them the findings that belong to the entry)."""
    from gpuperf_rewrite.lint import launch

    project = tmp_path / "proj"
    (project / "src" / "trainpkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'trainpkg'\n")
    (project / "src" / "trainpkg" / "__init__.py").write_text("")
    (project / "src" / "trainpkg" / "loop.py").write_text("def fit(model):\n    pass\n")
    train = project / "train.py"
    train.write_text("from trainpkg.loop import fit\n\nif __name__ == '__main__':\n    fit(None)\n")
    loop = project / "src" / "trainpkg" / "loop.py"
    launch._DIRECT.clear()
    assert loop in launch._direct_imports(train, project)
    launch._direct_imports(train, tmp_path)  # seen from the folder above, where the name may not resolve
    assert loop in launch._direct_imports(train, project)
    launch._DIRECT.clear()
    launch._direct_imports(train, tmp_path)
    assert loop in launch._direct_imports(train, project)


def test_wrapper_script_takes_the_settings_of_the_entry_it_runs(tmp_path):
    """train.py only runs main.py's main(): cuDNN chosen there is chosen for train.py's program; a
    script importing main.py without calling into it does not inherit it."""
    from gpuperf_rewrite.lint.entry_settings import program_settings

    (tmp_path / "main.py").write_text(
        "import torch\n\ndef main(mode=1):\n    torch.backends.cudnn.benchmark = True\n\n"
        "if __name__ == '__main__':\n    main()\n")
    (tmp_path / "train.py").write_text("from main import main\n\nmain(mode=1)\n")
    (tmp_path / "other.py").write_text("from main import main\n\nprint(1)\n")
    assert "cudnn" in program_settings(tmp_path / "train.py", tmp_path)
    assert "cudnn" not in program_settings(tmp_path / "other.py", tmp_path)


# A checkout without a project marker whose flat modules run from src/ (``PYTHONPATH=./src``) and
# whose launch scripts sit beside src/ in scripts/: the loader module reads no command line, its
# entry's parser hands it the worker count that the script passes.
FLAT_PARAMS = dedent("""\
    import argparse


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--num_workers", default=0, type=int)
        parser.add_argument("--batch_size", default=32, type=int)
        return parser.parse_args()
""")
FLAT_DATA = dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    def get_loader(batch_size, workers=4):
        ds = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
        return DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=True)
""")
FLAT_ENTRY = dedent("""\
    import torch

    from caption_data import get_loader
    from params import parse_args


    def main(args):
        model = torch.nn.Linear(8, 2).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        for x, y in get_loader(args.batch_size, workers=args.num_workers):
            loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


    if __name__ == "__main__":
        main(parse_args())
""")


@pytest.mark.parametrize("default", ["4", "0"])  # (0: the parameter's own default, which the entry overrides)
def test_a_launch_script_beside_a_markerless_src_folder_counts(tmp_path, default) -> None:
    top = tmp_path / "checkout"
    data = FLAT_DATA.replace("workers=4)", f"workers={default})")
    for rel, text in {"src/params.py": FLAT_PARAMS, "src/caption_data.py": data, "src/caption.py": FLAT_ENTRY,
                      "scripts/caption.sh": "PYTHONPATH=$PYTHONPATH:./src \\\npython src/caption.py \\\n"
                                            "    --batch_size 64 \\\n    --num_workers 4\n"}.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text)
    assert "GP201" not in _codes(top / "src" / "caption_data.py", "GP201")
    (top / "scripts" / "caption.sh").write_text("python src/caption.py --batch_size 64\n")
    assert _codes(top / "src" / "caption_data.py", "GP201") == ["GP201"]


def test_a_module_deep_in_a_large_repository_still_finds_its_entry(tmp_path, monkeypatch) -> None:
    """The importer search lists at most MAX_SCANNED Python files: in a repository with more, the walk
    takes the folders leading to the module first, so its entry script beside it is still found."""
    from gpuperf_rewrite.lint import launch, project_files

    for name, value in (("_FILES", {}),):
        monkeypatch.setattr(project_files, name, value)
    monkeypatch.setattr(launch, "_RUN_INFOS", {})
    monkeypatch.setattr(launch, "_REACHING", {})
    monkeypatch.setattr(project_files, "MAX_SCANNED", 6)
    root = _project(tmp_path, {**{f"aaa/tool_{i}.py": "import os\n" for i in range(10)},
                               "zzz/exp/data.py": DATA, "zzz/exp/main.py": GUARDED_MAIN})
    module = root / "zzz" / "exp" / "data.py"
    assert [info.path for info in launch._scripts_running(module, root)] == [root / "zzz" / "exp" / "main.py"]
    assert len(project_files.project_files(root)[0]) == 6  # the plain listing is still cut where it was
