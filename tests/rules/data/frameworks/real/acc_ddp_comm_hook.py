# Held-out shape of huggingface/accelerate examples/by_feature/ddp_comm_hook.py
# (435f5fc3ba51b461b21de026a99b62929e7eb7cf, Apache-2.0): condensed and rewritten here, not the
# original text. DistributedDataParallelKwargs(comm_hook=...) handed to the Accelerator.
import argparse

import torch
from torch.optim import AdamW
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from accelerate import Accelerator, DDPCommunicationHookType, DistributedDataParallelKwargs


def training_function(config, args):
    ddp_kwargs = DistributedDataParallelKwargs(comm_hook=DDPCommunicationHookType.FP16)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision, kwargs_handlers=[ddp_kwargs])
    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    train_dataloader = DataLoader(config["train"], shuffle=True, collate_fn=collate_fn, batch_size=16)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)
    optimizer = AdamW(params=model.parameters(), lr=2e-5)
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    for epoch in range(3):
        model.train()
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                optimizer.step()
                optimizer.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    training_function({"train": torch.utils.data.TensorDataset(torch.zeros(8, 4))}, args)


if __name__ == "__main__":
    main()
