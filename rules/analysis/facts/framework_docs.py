"""What the framework layer understands, in the words the rules' metadata and docs/rules.md use:
which configurations (and which versions) are read, and what is left unseen. Each rule module
names the frameworks its concept covers (``Rule.frameworks``) from these."""

from __future__ import annotations

HF = ("Hugging Face `TrainingArguments`/`Seq2SeqTrainingArguments` (transformers 4.x to 5.24) and the TRL "
      "configs that inherit them (`SFTConfig`, `DPOConfig`, `GRPOConfig`, ...; TRL up to 1.16, with their own "
      "defaults)")
LIGHTNING = "Lightning `Trainer` and `LightningModule` (`lightning` / `pytorch_lightning` 2.0 to 2.6)"
FABRIC = "Lightning `Fabric` (`lightning.fabric` / `lightning_fabric` 2.0 to 2.6): its `precision`"
ACCELERATE = "Accelerate `Accelerator` and its `DistributedDataParallelKwargs` (accelerate 0.2x to 1.15)"
TORCH = "PyTorch `DistributedDataParallel` (torch 2.x)"
# The loader settings of GP201, GP202 and GP203 share one limitation text (they are read together).
FRAMEWORK_LOADERS = (
    "Hugging Face Trainer scripts: `dataloader_num_workers` missing or 0 (GP201), `dataloader_pin_memory=False` "
    "(GP202; the default is True), `dataloader_persistent_workers` off while `dataloader_num_workers` is "
    "surely positive (GP203: a positive literal or `min(8, os.cpu_count() or 1)`; the Trainer passes the flag "
    "as it is and the DataLoader raises without workers; not reported when the file changes the count after "
    "building the arguments: `args.dataloader_num_workers = ...`, `set_dataloader(...)`, `dataclasses.replace`) "
    "are fixed on the `TrainingArguments`. Lightning loaders "
    "are the `DataLoader(...)` calls of `train_dataloader()` or handed to `fit`, checked like any DataLoader; a "
    "`*_dataloader()` hook of a LightningModule/LightningDataModule counts as run under `if __name__ == "
    "\"__main__\":` when every `trainer.fit/validate/test/predict(...)` (or `LightningCLI(...)`) of the file runs there.")
_OUT_OF_SIGHT = ("A configuration the file cannot see into (`HfArgumentParser`, TRL's `TrlParser`, `LightningCLI` "
                 "and its YAML, `**vars(args)` passed to the configuration call)")
_LAUNCHES = ("the project's own launch scripts pass it (a `*.sh` file under the project root that runs the file: "
             "`torchrun ... train.py --bf16 True`, `accelerate launch`, `deepspeed`, `python -m pkg.train`)")
_DICTS = ("Settings passed through a `**dict` built in the file are read: a missing keyword is added to the call "
          "(no dict sets it, so no duplicate can arise), a value set in the one dict that feeds only the "
          "configuration is changed there, anything else is reported without a fix.")


def blind_reported(flags: str) -> str:
    """The limitation of a rule that reports a slow framework default a parser leaves in place."""
    return (f"{_OUT_OF_SIGHT}: where the parsed `TrainingArguments` (or LightningCLI's `Trainer`) keep the "
            "framework's slow default and the file sets nothing else (no configuration call of its own, no default "
            "in its own `@dataclass` subclass, no `trainer_defaults` entry that may set it), the finding is reported "
            f"at the parser without a fix, its reason naming the flag a run must pass ({flags}), unless "
            f"{_LAUNCHES}; behind `**vars(args)` the script's own options decide, and nothing is reported. " + _DICTS)


def blind_silent(why: str) -> str:
    """The limitation of a rule that reports nothing about a configuration out of sight."""
    return f"{_OUT_OF_SIGHT} is not reported: {why}. " + _DICTS


# The overview docs/rules.md shows above the rules (each rule's limitations say its own part).
BLIND = (f"{_OUT_OF_SIGHT}: where the parser keeps the framework's slow default and the file sets nothing else, "
         "the finding is reported at the parser without a fix, its reason naming the flag a run must pass (GP201 "
         "`--dataloader_num_workers`, GP301 `--bf16` or `--trainer.precision bf16-mixed`, GP303 `--torch_compile`, "
         "GP304 `--trainer.benchmark true`, GP106 `--logging_nan_inf_filter False`), unless " + _LAUNCHES + "; GP302 keeps its module-level "
         "fix; GP202, GP203, GP305, GP502, GP504 and GP505 report nothing there (the default is fast, or the "
         "setting may well be there). Behind `**vars(args)` the script's own options decide: nothing is reported. "
         + _DICTS)

# What "a CPU-only program" means wherever a rule says it is not reported there (one fact,
# ``program.cpu_only``, answers it for every GPU-only rule; GP202 asks ``gpu_use.may_use_cuda``).
CPU_ONLY = ("**CPU-only programs**: the GPU-only rules (GP101-GP105, GP202, GP301-GP305, GP405) report nothing in a "
            "program that can never reach a GPU: a plain script that names no accelerator and only the CPU as its "
            "device, or a framework script whose every configuration says CPU and certainly so - Lightning "
            "`Trainer(accelerator=\"cpu\")` or `accelerator=CPUAccelerator()`, `Fabric(accelerator=\"cpu\")`, "
            "`Accelerator(cpu=True)`, `TrainingArguments(use_cpu=True)` or `no_cuda=True` - with no `.cuda()`, "
            "`\"cuda\"` device or device parameter elsewhere in the file. A value chosen at run time "
            "(`accelerator=args.accelerator`, even with a CPU default) or a configuration out of sight is not certain: "
            "those programs are checked.")
