"""The same Accelerate loop with the fast settings.

Expected rule codes (--select ALL): none
"""
import torch
from accelerate import Accelerator, DistributedDataParallelKwargs
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_float32_matmul_precision("high")
ddp_kwargs = DistributedDataParallelKwargs(gradient_as_bucket_view=True)
accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4, dynamo_backend="inductor",
                          kwargs_handlers=[ddp_kwargs])
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
data = TensorDataset(torch.randn(1024, 64), torch.randint(0, 10, (1024,)))
loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

for epoch in range(2):
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
