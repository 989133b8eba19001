# Held-out shape of huggingface/accelerate examples/by_feature/local_sgd.py
# (11ad1b3861c3eac8ee6ca7badef1309796667f60, Apache-2.0): condensed and rewritten here, not the
# original text. Accelerator(gradient_accumulation_steps=...) with accumulate() and LocalSGD.
import argparse

import torch
from torch.optim import AdamW
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from accelerate import Accelerator, DistributedType
from accelerate.local_sgd import LocalSGD


def training_function(config, args):
    gradient_accumulation_steps = int(args.gradient_accumulation_steps)
    local_sgd_steps = int(args.local_sgd_steps)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision,
                              gradient_accumulation_steps=gradient_accumulation_steps)
    if accelerator.distributed_type not in [DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU]:
        raise NotImplementedError("LocalSGD is supported only for CPUs and GPUs")
    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    train_dataloader = DataLoader(config["train"], shuffle=True, collate_fn=collate_fn, batch_size=16)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)
    optimizer = AdamW(params=model.parameters(), lr=config["lr"])
    lr_scheduler = get_linear_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=100,
                                                   num_training_steps=len(train_dataloader) * 3)
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(model, optimizer, train_dataloader,
                                                                           lr_scheduler)
    for epoch in range(3):
        model.train()
        with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=local_sgd_steps,
                      enabled=local_sgd_steps is not None) as local_sgd:
            for step, batch in enumerate(train_dataloader):
                batch.to(accelerator.device)
                with accelerator.accumulate(model):
                    output = model(**batch)
                    accelerator.backward(output.loss)
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                    local_sgd.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--local_sgd_steps", type=int, default=8)
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    training_function({"lr": 2e-5, "train": torch.utils.data.TensorDataset(torch.zeros(8, 4))}, args)


if __name__ == "__main__":
    main()
