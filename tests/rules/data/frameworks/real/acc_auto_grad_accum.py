# Held-out shape of huggingface/accelerate examples/by_feature/automatic_gradient_accumulation.py
# (09a53e80242741fac713ee69bd238a3cf7735cb2, Apache-2.0): condensed and rewritten here, not the
# original text. The loop lives in a nested function under find_executable_batch_size and sets
# accelerator.gradient_accumulation_steps itself; accumulate() wraps every step.
import argparse

import torch
from torch.optim import AdamW
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup, set_seed

from accelerate import Accelerator
from accelerate.utils import find_executable_batch_size


def get_dataloaders(accelerator: Accelerator, batch_size: int = 16):
    from datasets import load_dataset

    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")
    data = load_dataset("glue", "mrpc").map(
        lambda e: tokenizer(e["sentence1"], e["sentence2"], truncation=True), batched=True,
        remove_columns=["idx", "sentence1", "sentence2"]).rename_column("label", "labels")

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    return (DataLoader(data["train"], shuffle=True, collate_fn=collate_fn, batch_size=batch_size),
            DataLoader(data["validation"], shuffle=False, collate_fn=collate_fn, batch_size=32))


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr, num_epochs = config["lr"], int(config["num_epochs"])
    observed_batch_size = int(config["batch_size"])

    @find_executable_batch_size(starting_batch_size=observed_batch_size)
    def inner_training_loop(batch_size):
        nonlocal accelerator
        accelerator.gradient_accumulation_steps = observed_batch_size // batch_size
        accelerator.free_memory()
        set_seed(int(config["seed"]))
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)
        model = model.to(accelerator.device)
        optimizer = AdamW(params=model.parameters(), lr=lr)
        train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)
        lr_scheduler = get_linear_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=100,
                                                       num_training_steps=len(train_dataloader) * num_epochs)
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
            model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)
        for epoch in range(num_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                with accelerator.accumulate(model):
                    batch.to(accelerator.device)
                    outputs = model(**batch)
                    accelerator.backward(outputs.loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            model.eval()
            for step, batch in enumerate(eval_dataloader):
                with torch.no_grad():
                    outputs = model(**batch)
                accelerator.gather_for_metrics((outputs.logits.argmax(dim=-1), batch["labels"]))

    inner_training_loop()
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--observed_batch_size", type=int, default=256)
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    training_function({"lr": 2e-5, "num_epochs": 3, "seed": 42, "batch_size": args.observed_batch_size}, args)


if __name__ == "__main__":
    main()
