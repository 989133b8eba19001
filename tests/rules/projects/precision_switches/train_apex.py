"""apex AMP behind an opt level that defaults to O0: pure float32 unless a run passes --amp O1."""
import argparse

import torch
from torch import nn

try:
    from apex import amp
except ImportError:
    amp = None


def train(model, loader, optimizer, device):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", type=str, default="O0")
    parser.add_argument("--epoch", type=int, default=100)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)
    if amp is not None:
        model, optimizer = amp.initialize(model, optimizer, opt_level=args.amp)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(512, 256), torch.randint(0, 10, (512,))),
                                         batch_size=64, num_workers=2, pin_memory=True, persistent_workers=True)
    for epoch in range(args.epoch):
        train(model, loader, optimizer, device)
