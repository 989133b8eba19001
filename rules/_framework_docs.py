"""What each rule says about the training frameworks: which configurations it understands (and
which versions), its framework limitations, and its framework examples (tested like the rule's
own). :func:`documented` adds them to a rule class, so a rule's module stays about its concept."""

from __future__ import annotations

from typing import Any

from ._api import Invalid, Valid, dedent

HF = ("Hugging Face `TrainingArguments`/`Seq2SeqTrainingArguments` (transformers 4.x to 5.24) and the TRL "
      "configs that inherit them (`SFTConfig`, `DPOConfig`, `GRPOConfig`, ...; TRL up to 1.16, with their own "
      "defaults)")
LIGHTNING = "Lightning `Trainer` and `LightningModule` (`lightning` / `pytorch_lightning` 2.0 to 2.6)"
ACCELERATE = "Accelerate `Accelerator` and its `DistributedDataParallelKwargs` (accelerate 0.2x to 1.15)"
TORCH = "PyTorch `DistributedDataParallel` (torch 2.x)"
BLIND = ("A configuration the file cannot see into (`HfArgumentParser`, TRL's `TrlParser`, `LightningCLI` "
         "and its YAML, `**vars(args)` passed to the configuration call) is not reported at all: the setting "
         "may well be there. Settings passed through a `**dict` built in the file are read; the fix then "
         "reports only.")

_DOCS: dict[str, dict[str, Any]] = {}


def _doc(code: str, frameworks: tuple[str, ...], limitations: tuple[str, ...], examples: list) -> None:
    _DOCS[code] = {"frameworks": frameworks, "limitations": (*limitations, BLIND), "examples": examples}


def documented(cls: Any) -> Any:
    """Class decorator: add the framework metadata and examples of ``cls.code``."""
    doc = _DOCS.get(cls.code)
    if doc is not None:
        cls.frameworks = doc["frameworks"]
        cls.limitations = (*cls.limitations, *doc["limitations"])
        cls.framework_examples = tuple(doc["examples"])
        cls.examples = [*cls.examples, *doc["examples"]]
    return cls


_doc("GP301", (HF, LIGHTNING, ACCELERATE), (
    "Framework scripts: `TrainingArguments` with neither `bf16` nor `fp16` gets `bf16=True`; a Lightning "
    "`Trainer` with no or a 32/64-bit `precision` gets `precision=\"bf16-mixed\"`; `Accelerator()` without "
    "`mixed_precision` (or with \"no\") gets `mixed_precision=\"bf16\"`, and the message says the launch "
    "configuration may set it instead (nothing is reported when the file names ACCELERATE_MIXED_PRECISION, "
    "when another Accelerator of the file chose a precision, or when no `backward` runs in the Accelerator's "
    "class, function, the functions of this file it calls, or (module level) anywhere in the file). "
    "TRL configs default to bfloat16 and are reported only with an explicit `bf16=False`; configurations "
    "on the CPU (`use_cpu=True`, `accelerator=\"cpu\"`, `Accelerator(cpu=True)`) are not reported.",
), [
    Invalid(dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", num_train_epochs=1)
        Trainer(model=model, args=args, train_dataset=ds).train()
    """), fixed=dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", num_train_epochs=1, bf16=True)
        Trainer(model=model, args=args, train_dataset=ds).train()
    """)),
    Valid(dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True)
        Trainer(model=model, args=args, train_dataset=ds).train()
    """)),
    Invalid(dedent("""
        import lightning as L
        trainer = L.Trainer(max_epochs=3, precision=32)
        trainer.fit(LitModel())
    """), fixed=dedent("""
        import lightning as L
        trainer = L.Trainer(max_epochs=3, precision="bf16-mixed")
        trainer.fit(LitModel())
    """)),
    Invalid(dedent("""
        from accelerate import Accelerator
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
    """), fixed=dedent("""
        from accelerate import Accelerator
        accelerator = Accelerator(mixed_precision="bf16")
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
    """)),
    Valid(dedent("""
        from accelerate import Accelerator
        def gather_metrics(model, loader):  # evaluates only: nothing trains here
            accelerator = Accelerator()
            model, loader = accelerator.prepare(model, loader)
            return [accelerator.gather(model(**batch).logits) for batch in loader]
    """)),
    Valid(dedent("""
        from trl import SFTConfig, SFTTrainer  # TRL configs train in bfloat16 unless fp16
        SFTTrainer(model=model, args=SFTConfig(output_dir="out"), train_dataset=ds).train()
    """)),
    Valid(dedent("""
        from pytorch_lightning import Trainer
        Trainer(precision="bf16-mixed").fit(LitModel())
    """)),
    Valid(dedent("""
        from transformers import HfArgumentParser, Trainer, TrainingArguments
        (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()  # --bf16 may be given
        Trainer(model=model, args=args, train_dataset=ds).train()
    """)),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(**vars(cli_args))
    """)),
])

_doc("GP302", (HF, LIGHTNING, ACCELERATE), (
    "A Hugging Face Trainer script gets `tf32=True` on its `TrainingArguments` (any `tf32` value given is "
    "the user's choice); Lightning and Accelerate scripts get `torch.set_float32_matmul_precision(\"high\")` "
    "like a plain script.",
), [
    Invalid(dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True)
        Trainer(model=model, args=args).train()
    """), fixed=dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True, tf32=True)
        Trainer(model=model, args=args).train()
    """)),
    Valid(dedent("""
        from transformers import Seq2SeqTrainingArguments
        args = Seq2SeqTrainingArguments(output_dir="out", tf32=False)  # the user's choice
    """)),
])

_doc("GP303", (HF, LIGHTNING, ACCELERATE), (
    "A Hugging Face Trainer script gets `torch_compile=True` (any `torch_compile` given is the user's "
    "choice); a Lightning module gets `model.compile()` "
    "before the statement `trainer.fit(model, ...)` (no fix when the model passed is not a plain name); "
    "an Accelerate script is silent when `Accelerator(dynamo_backend=...)` or a `TorchDynamoPlugin` "
    "compiles, and otherwise gets `model.compile()` like a plain script.",
), [
    Invalid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True)
    """), fixed=dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True, torch_compile=True)
    """)),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", torch_compile=False)  # the user's choice
    """)),
    Invalid(dedent("""
        import lightning as L
        import torch
        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                return self.net(batch).sum()
            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), fused=True)
        model = Lit()
        trainer = L.Trainer(precision="bf16-mixed")
        trainer.fit(model)
    """), fixed=dedent("""
        import lightning as L
        import torch
        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                return self.net(batch).sum()
            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), fused=True)
        model = Lit()
        trainer = L.Trainer(precision="bf16-mixed")
        model.compile()
        trainer.fit(model)
    """)),
    Invalid(dedent("""
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        model = Net().to(accelerator.device)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
    """), fixed=dedent("""
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator(dynamo_backend="inductor")
        model = Net().to(accelerator.device)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
    """)),
    Valid(dedent("""
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator(dynamo_backend="inductor")
        model = torch.nn.Linear(8, 8)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for x in loader:
            accelerator.backward(model(x).sum())
            optimizer.step()
    """)),
])

_LOADER = (
    "Hugging Face Trainer scripts: `dataloader_num_workers` missing or 0 (GP201), `dataloader_pin_memory=False` "
    "(GP202; the default is True), `dataloader_persistent_workers` off while `dataloader_num_workers` is "
    "surely positive (GP203: a positive literal or `min(8, os.cpu_count() or 1)`; the Trainer passes the flag "
    "as it is and the DataLoader raises without workers) are fixed on the `TrainingArguments`. Lightning loaders are the `DataLoader(...)` calls of "
    "`train_dataloader()` or handed to `fit`, checked like any DataLoader.",
)
_doc("GP201", (HF, LIGHTNING), _LOADER, [
    Invalid(dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True)
        if __name__ == "__main__":
            Trainer(model=model, args=args, train_dataset=ds).train()
    """), fixed=dedent("""
        from transformers import Trainer, TrainingArguments
        import os

        args = TrainingArguments(output_dir="out", bf16=True, dataloader_num_workers=min(8, os.cpu_count() or 1))
        if __name__ == "__main__":
            Trainer(model=model, args=args, train_dataset=ds).train()
    """)),
    Invalid(dedent("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="out", bf16=True)
        Trainer(model=model, args=args, train_dataset=ds).train()  # workers would re-run this under spawn
    """), fixed=None),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=args_workers)
    """)),
])
_doc("GP202", (HF, LIGHTNING), _LOADER, [
    Invalid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_pin_memory=False)
    """), fixed=dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_pin_memory=True)
    """)),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out")  # pinned by default
    """)),
])
_doc("GP203", (HF, LIGHTNING), _LOADER, [
    Invalid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4)
    """), fixed=dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", dataloader_num_workers=4, dataloader_persistent_workers=True)
    """)),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out")  # no workers: nothing to keep alive
    """)),
])

_doc("GP304", (LIGHTNING,), (
    "A Lightning script gets `Trainer(benchmark=True)` instead of the module-level switch (Lightning's "
    "`benchmark=None` leaves cuDNN's flag as it is, and `deterministic=True` forces it off); any "
    "`benchmark`/`deterministic` given to the Trainer is the user's choice.",
), [
    Invalid(dedent("""
        import lightning as L
        from torch import nn
        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
            def training_step(self, batch, batch_idx):
                return self.conv(batch).sum()
        trainer = L.Trainer(accelerator="gpu")
        trainer.fit(Lit())
    """), fixed=dedent("""
        import lightning as L
        from torch import nn
        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
            def training_step(self, batch, batch_idx):
                return self.conv(batch).sum()
        trainer = L.Trainer(accelerator="gpu", benchmark=True)
        trainer.fit(Lit())
    """)),
])

_doc("GP305", (HF,), (
    "Hugging Face Trainer: `optim` unset is reported for transformers up to 4.53 and torch < 2.8, which "
    "default to the unfused \"adamw_torch\" (from 4.54 with torch >= 2.8 the default is already "
    "\"adamw_torch_fused\": the fix then only makes it explicit); `optim=\"adamw_torch\"`/\"adamw_hf\" is "
    "always reported. Other optimizers are left alone. Lightning's `configure_optimizers` and Accelerate "
    "loops build torch optimizers, checked like a plain script's.",
), [
    Invalid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", optim="adamw_torch")
    """), fixed=dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", optim="adamw_torch_fused")
    """)),
    Valid(dedent("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="out", optim="adafactor")
    """)),
])

_doc("GP502", (TORCH, LIGHTNING, ACCELERATE), (
    "Lightning `strategy=\"ddp\"` (and the other DDP strategy names) becomes "
    "`DDPStrategy(gradient_as_bucket_view=True)`; `DDPStrategy(...)` and Accelerate's "
    "`DistributedDataParallelKwargs(...)` get the keyword. An `Accelerator` without DDP keyword handlers "
    "is not reported (the file cannot tell whether it is launched on several processes), nor the Hugging "
    "Face Trainer (it has no such argument).",
), [
    Invalid(dedent("""
        import lightning as L
        trainer = L.Trainer(devices=4, strategy="ddp")
    """), fixed=dedent("""
        import lightning as L
        from lightning.pytorch.strategies import DDPStrategy

        trainer = L.Trainer(devices=4, strategy=DDPStrategy(gradient_as_bucket_view=True))
    """)),
    Invalid(dedent("""
        from accelerate import Accelerator, DistributedDataParallelKwargs
        accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(static_graph=True)])
    """), fixed=dedent("""
        from accelerate import Accelerator, DistributedDataParallelKwargs
        accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(static_graph=True, gradient_as_bucket_view=True)])
    """)),
    Valid(dedent("""
        from pytorch_lightning.strategies import DDPStrategy
        strategy = DDPStrategy(gradient_as_bucket_view=True)
    """)),
])
