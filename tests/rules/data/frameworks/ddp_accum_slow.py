"""A plain DDP loop that accumulates gradients by hand without no_sync, searching for unused parameters.

Expected rule codes (--select ALL): GP104 x2, GP301, GP302, GP303, GP305, GP504, GP505
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
rank = int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", rank)
model = DDP(torch.nn.Linear(64, 10).to(device), device_ids=[rank], find_unused_parameters=True,
            gradient_as_bucket_view=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accum = 8
for i, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
