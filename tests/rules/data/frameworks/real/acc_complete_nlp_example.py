# Held-out shape of huggingface/accelerate examples/complete_nlp_example.py
# (62357f218f72cce88b8e086cc372b15c119b590b, Apache-2.0): condensed and rewritten here, not the
# original text. One of two Accelerator calls is built depending on --with_tracking; checkpoints
# with save_state; hand-written accumulation over a prepared loader.
import argparse
import os

import torch
from torch.optim import AdamW
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from accelerate import Accelerator

MAX_GPU_BATCH_SIZE = 16


def training_function(config, args):
    if args.with_tracking:
        accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision, log_with="all",
                                  project_dir=args.project_dir)
    else:
        accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    batch_size = int(config["batch_size"])
    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE
    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    train_dataloader = DataLoader(config["train"], shuffle=True, collate_fn=collate_fn, batch_size=batch_size)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)
    model = model.to(accelerator.device)
    optimizer = AdamW(params=model.parameters(), lr=config["lr"])
    lr_scheduler = get_linear_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=100,
                                                   num_training_steps=len(train_dataloader) * 3)
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(model, optimizer, train_dataloader,
                                                                           lr_scheduler)
    overall_step = 0
    for epoch in range(3):
        model.train()
        if args.with_tracking:
            total_loss = 0
        for step, batch in enumerate(train_dataloader):
            batch.to(accelerator.device)
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / gradient_accumulation_steps
            if args.with_tracking:
                total_loss += loss.detach().float()
            accelerator.backward(loss)
            if step % gradient_accumulation_steps == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            overall_step += 1
            if isinstance(args.checkpointing_steps, int) and overall_step % args.checkpointing_steps == 0:
                accelerator.save_state(os.path.join(args.output_dir, f"step_{overall_step}"))
        if args.with_tracking:
            accelerator.log({"train_loss": total_loss.item() / len(train_dataloader), "epoch": epoch},
                            step=epoch)
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--checkpointing_steps", type=int, default=None)
    parser.add_argument("--with_tracking", action="store_true")
    parser.add_argument("--output_dir", type=str, default=".")
    parser.add_argument("--project_dir", type=str, default="logs")
    args = parser.parse_args()
    training_function({"lr": 2e-5, "batch_size": 16, "train": torch.utils.data.TensorDataset(torch.zeros(8, 4))},
                      args)


if __name__ == "__main__":
    main()
