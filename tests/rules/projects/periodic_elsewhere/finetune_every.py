"""Validates after every epoch: engine.evaluate's reads run once per eval batch of every epoch."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from engine import evaluate

device = "cuda"
model = torch.nn.Linear(16, 4).to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
data = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2, pin_memory=True, persistent_workers=True)

for epoch in range(100):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    evaluate(model, loader, device)
