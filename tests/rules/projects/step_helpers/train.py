"""A speech-style project: the loop is here, the per-step work in helpers of other modules."""
import argparse

import torch
from torch.utils.data import DataLoader

from data import SpectrogramSet, pad_numpy
from losses import MaskedL1
from model import Vocoder
from utils.batching import move_batch
from utils.grads import clip_by_value, grad_report, summarize_epoch, timed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = Vocoder().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4, fused=True)
    criterion = MaskedL1(weight=2.0)
    loader = DataLoader(SpectrogramSet("train"), batch_size=16, collate_fn=pad_numpy, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    for epoch in range(args.epochs):
        losses = []
        for step, batch in enumerate(loader):
            mels, audio, lengths = move_batch(batch, device)
            loss = criterion(model(mels), audio, lengths)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            clip_by_value(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.detach())
            _, seconds = timed(optimizer.zero_grad)
            if step % 200 == 0:
                grad_report(model.named_parameters(), step)
        summarize_epoch(losses, epoch)


if __name__ == "__main__":
    main()
