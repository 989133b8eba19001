"""Seed of the mutation test: nanoGPT's loop in small (micro-steps with require_backward_grad_sync,
AMP with a GradScaler, a periodic no-grad evaluation, a logged loss)."""
import os
from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

ddp = int(os.environ.get("RANK", -1)) != -1
device_type = "cuda" if torch.cuda.is_available() else "cpu"
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
model = torch.nn.Linear(8, 8).to(device_type)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler(enabled=device_type == "cuda")
if ddp:
    model = DDP(model, device_ids=[int(os.environ["LOCAL_RANK"])])
X, Y = torch.randn(4, 8), torch.randn(4, 8)
for it in range(max_iters):
    if it % eval_interval == 0:
        model.eval()
        with torch.no_grad():
            losses = [torch.nn.functional.mse_loss(model(X), Y).item() for _ in range(4)]
        model.train()
        if master_process:
            print("eval", sum(losses) / len(losses))
    for micro_step in range(accum):
        if ddp: model.require_backward_grad_sync = (micro_step == accum - 1)
        with ctx:
            loss = torch.nn.functional.mse_loss(model(X), Y) / accum
        X, Y = X.to(device_type), Y.to(device_type)
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if it % log_interval == 0:
        print(it, loss.item() * accum)
