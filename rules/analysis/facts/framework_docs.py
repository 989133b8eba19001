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
    "as it is and the DataLoader raises without workers) are fixed on the `TrainingArguments`. Lightning loaders "
    "are the `DataLoader(...)` calls of `train_dataloader()` or handed to `fit`, checked like any DataLoader; a "
    "`*_dataloader()` hook of a LightningModule/LightningDataModule counts as run under `if __name__ == "
    "\"__main__\":` when every `trainer.fit/validate/test/predict(...)` (or `LightningCLI(...)`) of the file runs there.")
BLIND = ("A configuration the file cannot see into (`HfArgumentParser`, TRL's `TrlParser`, `LightningCLI` "
         "and its YAML, `**vars(args)` passed to the configuration call) is not reported at all: the setting "
         "may well be there. Settings passed through a `**dict` built in the file are read: a missing keyword is "
         "added to the call (no dict sets it, so no duplicate can arise), a value set in the one dict that feeds "
         "only the configuration is changed there, anything else is reported without a fix.")
