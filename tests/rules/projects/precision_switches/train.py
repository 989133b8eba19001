"""A captioning fine-tune whose mixed precision is chosen by --precision, fp32 by default; the
step (train_utils.py) picks its autocast from that string."""
import argparse

import torch

from models import build_model
from train_utils import train_one_epoch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["amp_bf16", "amp_bfloat16", "bf16", "fp16", "fp32"], default="fp32")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-4)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = build_model(args).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    loader = torch.utils.data.DataLoader(torch.randn(1024, 512), batch_size=32, num_workers=4,
                                         pin_memory=True, persistent_workers=True)
    for epoch in range(args.epochs):
        train_one_epoch(args, model, loader, optimizer, device)


if __name__ == "__main__":
    main()
