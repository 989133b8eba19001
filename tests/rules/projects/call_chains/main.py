"""A project whose per-step work is two and three calls away from the loop: the loop is here, the
step in engine.py, the metrics and losses in modules engine.py imports (callers of callers)."""
import argparse

import torch
from torch.utils.data import DataLoader

import engine
from data import ClipSet
from nets import Classifier
from runners.ranking import RankingRunner


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = Classifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    loader = DataLoader(ClipSet("train"), batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
    val_loader = DataLoader(ClipSet("val"), batch_size=256, num_workers=8, pin_memory=True, persistent_workers=True)
    runner = RankingRunner(model, val_loader, device, ks=(1, 5, 10))
    for epoch in range(args.epochs):
        history = []
        for step, batch in enumerate(loader):
            history.append(engine.fit_batch(model, batch, optimizer, device, step))
        engine.summarize(history, epoch)
        runner.evaluate()


if __name__ == "__main__":
    main()
