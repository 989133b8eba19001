"""Configurations the file cannot see into (rules/analysis/fixes/framework_blind.py): a slow
framework default a parser surely keeps is reported without a fix whose reason names the flag a
run must pass; everything else about such a configuration is not reported."""

from __future__ import annotations

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection

ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))
HF = ("from transformers import HfArgumentParser, Trainer, TrainingArguments\n"
      "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
      "if __name__ == '__main__':\n    Trainer(model=model, args=args, train_dataset=ds).train()\n")
CLI = ("import lightning as L\nfrom lightning.pytorch.cli import LightningCLI\nimport torch.nn as nn\n"
       "class Net(L.LightningModule):\n    def __init__(self):\n        super().__init__()\n"
       "        self.conv = nn.Conv2d(3, 8, 3)\n    def training_step(self, batch, i):\n"
       "        return self.conv(batch).mean()\n"
       "if __name__ == '__main__':\n    LightningCLI(Net)\n")


def _found(source: str) -> dict[str, str | None]:
    res = check_source(source.encode(), "train.py", ALL)
    return {d.code: d.no_fix_reason for d in res.diagnostics if d.fix is None}


def test_hf_parser_reports_the_slow_defaults_naming_each_flag() -> None:
    found = _found(HF)
    for code, flag in (("GP106", "--logging_nan_inf_filter False"), ("GP201", "--dataloader_num_workers"),
                       ("GP301", "--bf16"), ("GP303", "--torch_compile")):
        assert flag in (found.get(code) or ""), (code, found)
    for code in ("GP202", "GP203", "GP305", "GP502", "GP505"):  # fast default, or may well be there
        assert code not in found, found


def test_lightning_cli_reports_precision_and_benchmark_unless_trainer_defaults_may_set_them() -> None:
    found = _found(CLI)
    assert "--trainer.precision bf16-mixed" in (found.get("GP301") or "")
    assert "--trainer.benchmark true" in (found.get("GP304") or "")
    quiet = _found(CLI.replace("LightningCLI(Net)", "LightningCLI(Net, trainer_defaults=DEFAULTS)"))
    assert "GP301" not in quiet and "GP304" not in quiet


def test_vars_args_and_a_visible_call_beside_the_parser_stay_silent() -> None:
    vars_args = "from transformers import TrainingArguments, Trainer\nargs = TrainingArguments(**vars(cli))\n" \
                "Trainer(model=m, args=args).train()\n"
    assert not {"GP106", "GP201", "GP301", "GP303"} & set(_found(vars_args))
    beside = HF.replace("(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n",
                        "(margs,) = HfArgumentParser(ModelArguments).parse_args_into_dataclasses()\n"
                        "args = TrainingArguments(output_dir='o', **extra)\n")
    assert not any("--" in (r or "") for r in _found(beside).values())
