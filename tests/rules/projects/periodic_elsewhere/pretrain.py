"""A character-model pretraining loop: evaluation through the evaluation module every eval_interval iterations."""
import torch
from torch.utils.data import DataLoader, TensorDataset

import evaluation

eval_interval = 500
max_iters = 5000
device = "cuda"
model = torch.nn.Linear(16, 4).to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
data = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
train_loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2, pin_memory=True, persistent_workers=True)
val_loader = DataLoader(data, batch_size=16, num_workers=2, pin_memory=True, persistent_workers=True)

iter_num = 0
while iter_num < max_iters:
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        iter_num += 1
        if iter_num % eval_interval == 0:
            val_loss = evaluation.estimate_loss(model, val_loader, device)
