"""An Accelerate loop with hand-written gradient accumulation and no mixed precision.

    accelerate launch --num_processes 2 accelerate_slow.py

Expected rule codes (--select ALL): GP201, GP202, GP301, GP302, GP303, GP305, GP502, GP504, GP505
"""
import torch
from accelerate import Accelerator, DistributedDataParallelKwargs
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

accum_steps = 4
ddp_kwargs = DistributedDataParallelKwargs(find_unused_parameters=True)
accelerator = Accelerator(kwargs_handlers=[ddp_kwargs])
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = TensorDataset(torch.randn(1024, 64), torch.randint(0, 10, (1024,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for epoch in range(2):
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y) / accum_steps
        accelerator.backward(loss)
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
