"""TF32 only when a run passes --tf32 (off by default): GP302 stays."""
import argparse

import torch
from torch import nn

from common import maybe_tf32

parser = argparse.ArgumentParser()
parser.add_argument("--tf32", action="store_true")
args = parser.parse_args()
maybe_tf32(args.tf32)
device = torch.device("cuda")
model = torch.compile(nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10)).to(device))
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
for step in range(100):
    x = torch.randn(64, 1024, device=device)
    y = torch.randint(0, 10, (64,), device=device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
