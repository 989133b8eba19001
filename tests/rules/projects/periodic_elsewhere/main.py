"""The entry: validation only every `val_interval` epochs (and on the first), through running.validate."""
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from running import Runner, validate

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=100)
parser.add_argument("--val_interval", type=int, default=2)
args = parser.parse_args()

device = torch.device("cuda")
model = torch.nn.Linear(8, 1).to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
loader = DataLoader(data, batch_size=8, num_workers=4, pin_memory=True, persistent_workers=True)
trainer = Runner(model, loader, optimizer, device)
evaluator = Runner(model, loader, None, device)

for epoch in range(1, args.epochs + 1):
    trainer.train_epoch(epoch)
    if epoch == 1 or epoch % args.val_interval == 0:
        validate(evaluator, epoch)
