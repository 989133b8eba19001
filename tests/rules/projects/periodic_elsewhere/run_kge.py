"""The KGE entry: a step loop over train_step, validation under `step % valid_steps`."""
import argparse

import torch
from torch.utils.data import DataLoader

from kge import KGEModel

parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=100000)
parser.add_argument("--valid_steps", type=int, default=10000)
args = parser.parse_args()

device = torch.device("cuda")
kge_model = KGEModel(1000, 64).to(device)
optimizer = torch.optim.Adam(kge_model.parameters(), fused=True)
train_loader = DataLoader(torch.arange(1000), batch_size=32, shuffle=True, num_workers=2, pin_memory=True,
                          persistent_workers=True)
test_loader = DataLoader(torch.arange(1000), batch_size=32, num_workers=2, pin_memory=True, persistent_workers=True)


def forever(loader):
    while True:
        yield from loader


train_iterator = forever(train_loader)
for step in range(args.max_steps):
    log = KGEModel.train_step(kge_model, optimizer, train_iterator, device)
    if step % args.valid_steps == 0:
        metrics = kge_model.test_step(kge_model, test_loader, device)
