"""The framework layer on real framework scripts of our own (tests/rules/data/frameworks/): a
Hugging Face Trainer fine-tune, a Lightning module, an Accelerate loop and a plain DDP loop, each
slow and already fast. Each gets exactly the codes its docstring promises; the combined
`--fix --unsafe-fixes` rewrite re-parses, is idempotent and keeps every comment; configurations
the file cannot see into get no fix; names resolve through imports, not spelling."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection

DATA = Path(__file__).parent / "data" / "frameworks"
SCRIPTS = sorted(DATA.glob("*.py"))
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))


def expected(path: Path) -> collections.Counter[str]:
    m = re.search(r"Expected rule codes \(--select ALL\): (.*)", path.read_text())
    assert m, f"{path.name} lacks an 'Expected rule codes' line"
    out: collections.Counter[str] = collections.Counter()
    for code, times in re.findall(r"(GP\d{3})(?: x(\d+))?", m.group(1)):
        out[code] += int(times or 1)
    return out


def lint(source: str | bytes, name: str = "train.py", fix: str | None = None):  # type: ignore[no-untyped-def]
    data = source.encode() if isinstance(source, str) else source
    return check_source(data, name, ALL, fix) if fix else check_source(data, name, ALL)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_framework_script_gets_exactly_its_codes(script: Path) -> None:
    found = collections.Counter(d.code for d in lint(script.read_bytes(), script.name).diagnostics)
    assert found == expected(script)


@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.name.endswith("_slow.py")], ids=lambda p: p.name)
def test_framework_rewrite_parses_is_idempotent_and_keeps_comments(script: Path) -> None:
    res = lint(script.read_bytes(), script.name, "unsafe")
    assert res.fixed is not None and not res.warnings, res.warnings
    cst.parse_module(res.fixed)
    compile(res.fixed, script.name, "exec")
    assert lint(res.fixed, script.name, "unsafe").fixed is None, "a second pass changed the file"
    for line in script.read_text().splitlines():
        if line.lstrip().startswith("#"):
            assert line.strip() in res.fixed.decode()
    # What stays reported after the rewrite is what has no automatic fix.
    after = lint(res.fixed, script.name)
    assert all(d.fix is None for d in after.diagnostics), [d.code for d in after.diagnostics if d.fix]


def _codes(source: str) -> list[str]:
    return sorted(d.code for d in lint(source).diagnostics)


# transformers and torch older than the fused-AdamW default, as the lint layer would read them.
OLD = RuleSet(ALL.codes, environment={"transformers": "4.53.2", "torch": "2.7.1"})


def test_fixed_framework_settings_are_the_frameworks_own() -> None:
    data = (DATA / "hf_trainer_slow.py").read_bytes()
    fixed = check_source(data, "t.py", OLD, "unsafe").fixed.decode()
    # Compiling and bfloat16 only where CUDA is: a CPU run of the rewrite is not slower.
    for setting in ("bf16=torch.cuda.is_bf16_supported(including_emulation=False)",
                    "torch_compile=torch.cuda.is_available()", 'optim="adamw_torch_fused"',
                    "dataloader_num_workers=min(8, os.cpu_count() or 1)", "dataloader_persistent_workers=True",
                    "logging_nan_inf_filter=False", "ddp_find_unused_parameters=False"):
        assert setting in fixed
    # TF32 through torch, not tf32=True: TrainingArguments raises on it without an Ampere GPU.
    assert "autocast" not in fixed and "tf32" not in fixed
    assert 'torch.set_float32_matmul_precision("high")' in fixed
    fixed = lint((DATA / "lightning_slow.py").read_bytes(), "t.py", "unsafe").fixed.decode()
    for setting in ('precision="bf16-mixed"', "benchmark=True", "gradient_as_bucket_view=True",
                    "find_unused_parameters=False", "if torch.cuda.is_available():\n    model.compile()\ntrainer.fit(model)",
                    "on_step=False, on_epoch=True", "from lightning.pytorch.strategies import DDPStrategy"):
        assert setting in fixed
    fixed = lint((DATA / "accelerate_slow.py").read_bytes(), "t.py", "unsafe").fixed.decode()
    for setting in ('mixed_precision="bf16"', 'dynamo_backend="inductor"', "gradient_as_bucket_view=True"):
        assert setting in fixed


def test_configuration_out_of_sight_gets_no_framework_finding() -> None:
    assert _codes("from transformers import TrainingArguments\nargs = TrainingArguments(**vars(cli))\n") == []
    src = ("from lightning.pytorch.cli import LightningCLI\nimport lightning as L\n"
           "cli = LightningCLI(Model)\ntrainer = L.Trainer(max_epochs=1)\n")
    assert "GP301" not in _codes(src)
    # HfArgumentParser: the slow defaults are reported without a fix, naming the flag
    # (tests/rules/test_unseen_configuration.py); GP302 as in any module (no __main__ guard here).
    res = lint((DATA / "hf_parser_blind.py").read_bytes())
    assert sorted((d.code, d.fix is None) for d in res.diagnostics) == [
        ("GP106", True), ("GP201", True), ("GP301", True), ("GP302", True), ("GP303", True)]
    assert all(d.no_fix_reason for d in res.diagnostics)


def test_framework_names_resolve_through_imports_not_spelling() -> None:
    aliased = "from transformers import TrainingArguments as TA\nargs = TA(output_dir='o', report_to=[])\n"
    assert {"GP301", "GP302", "GP303", "GP305", "GP106"} <= set(_codes(aliased))
    subclass = ("import transformers\nclass MyArgs(transformers.Seq2SeqTrainingArguments):\n    pass\n"
                "args = MyArgs(output_dir='o')\n")
    assert "GP301" in _codes(subclass)
    own = ("import torch\nclass TrainingArguments:\n    def __init__(self, **kw):\n        pass\n"
           "class Accelerator:\n    pass\nargs = TrainingArguments(output_dir='o')\nacc = Accelerator()\n")
    assert _codes(own) == []
    trl = "from trl import SFTConfig, ModelConfig\ncfg = SFTConfig(output_dir='o', tf32=True, torch_compile=True)\n"
    assert "GP301" not in _codes(trl)  # TRL trains in bfloat16 unless fp16
    assert "GP301" in _codes(trl.replace("tf32=True", "bf16=False"))


def test_framework_already_fast_or_on_cpu_is_silent() -> None:
    assert _codes("import lightning as L\nL.Trainer(accelerator='cpu').fit(m)\n") == []
    assert "GP301" not in _codes("from accelerate import Accelerator\nacc = Accelerator(cpu=True)\n")
    src = "import os\nos.environ['ACCELERATE_MIXED_PRECISION'] = 'bf16'\nfrom accelerate import Accelerator\na = Accelerator()\n"
    assert "GP301" not in _codes(src)


def test_lightning_ddp_strategy_fixes_converge() -> None:
    src = "import pytorch_lightning as pl\ntrainer = pl.Trainer(strategy='ddp_find_unused_parameters_true')\n"
    fixed = lint(src, fix="unsafe").fixed.decode()
    assert "from pytorch_lightning.strategies import DDPStrategy" in fixed
    assert "DDPStrategy(gradient_as_bucket_view=True)" in fixed or \
        "DDPStrategy(find_unused_parameters=False, gradient_as_bucket_view=True)" in fixed
    assert lint(fixed, fix="unsafe").fixed is None


def test_settings_read_through_dicts_and_expressions() -> None:
    src = ("from transformers import TrainingArguments\ncommon = dict(output_dir='o', bf16=True)\n"
           "args = TrainingArguments(**common, dataloader_num_workers=4)\n")
    res = lint(src)
    codes = {d.code: d for d in res.diagnostics}
    assert "GP301" not in codes and "GP201" not in codes  # bf16 in the dict, workers given
    # No dict sets it (the file shows every dict in full): the keyword goes on the call.
    fixed = lint(src, fix="safe").fixed
    assert fixed is not None and b"dataloader_num_workers=4, dataloader_persistent_workers=True)" in fixed
    # Unless a source the file cannot see into may set it: then report only.
    blind = lint(src.replace("**common", "**common, **vars(cli)"))
    assert [d.fix for d in blind.diagnostics if d.code == "GP203"] in ([], [None])
    # Workers that may be 0: persistent_workers=True would make the DataLoader raise.
    assert "GP203" not in _codes("from transformers import TrainingArguments\n"
                                 "a = TrainingArguments(output_dir='o', dataloader_num_workers=cli.workers)\n")
    src = "from accelerate import Accelerator\nacc = Accelerator(mixed_precision=args.mixed_precision)\n"
    assert "GP301" not in _codes(src + "acc.backward(loss)\n")


# The rules that report nothing in a CPU-only program (their docs say so), asked through one fact.
GPU_ONLY = {"GP101", "GP102", "GP103", "GP104", "GP105", "GP202", "GP301", "GP302", "GP303", "GP304", "GP305",
            "GP405"}


@pytest.mark.parametrize("script, old, new", [
    ("lightning_slow.py", 'accelerator="gpu", devices=2, strategy="ddp_find_unused_parameters_true"',
     'accelerator="cpu", devices=2'),
    ("lightning_slow.py", 'accelerator="gpu", devices=2, strategy="ddp_find_unused_parameters_true"',
     "accelerator=CPUAccelerator()"),
    ("hf_trainer_slow.py", "report_to=[],", "report_to=[], use_cpu=True,"),
    ("hf_trainer_slow.py", "report_to=[],", "report_to=[], no_cuda=True,"),
    ("accelerate_slow.py", "Accelerator(kwargs_handlers=[ddp_kwargs])", "Accelerator(cpu=True, kwargs_handlers=[ddp_kwargs])"),
])
def test_every_gpu_only_rule_agrees_a_framework_on_the_cpu_is_cpu_only(script: str, old: str, new: str) -> None:
    source = (DATA / script).read_text()
    assert old in source
    source = source.replace(old, new)
    if "CPUAccelerator" in new:
        source = source.replace("import lightning as L\n",
                                "import lightning as L\nfrom lightning.pytorch.accelerators import CPUAccelerator\n")
    found = set(_codes(source))
    assert not found & GPU_ONLY, sorted(found & GPU_ONLY)
    assert set(_codes((DATA / script).read_text())) & GPU_ONLY  # on the GPU they do report


def test_a_cpu_accelerator_chosen_at_run_time_is_not_certain() -> None:
    source = (DATA / "lightning_slow.py").read_text().replace(
        'accelerator="gpu", devices=2, strategy="ddp_find_unused_parameters_true"', "accelerator=args.accelerator")
    source = source.replace("model = LitConvNet()\n", 'import argparse\np = argparse.ArgumentParser()\n'
                            'p.add_argument("--accelerator", default="cpu")\nargs = p.parse_args()\nmodel = LitConvNet()\n')
    assert {"GP202", "GP302", "GP303", "GP304", "GP305"} <= set(_codes(source))
    # A Fabric on the CPU with a .cuda() elsewhere in the file can still reach a GPU.
    fabric = ("import torch\nfrom lightning import Fabric\nfabric = Fabric(accelerator=\"cpu\")\n"
              "model = torch.nn.Linear(8, 8).cuda()\nopt = torch.optim.AdamW(model.parameters())\n"
              "for x in loader:\n    fabric.backward(model(x).sum())\n    opt.step()\n")
    assert "GP305" in _codes(fabric)
