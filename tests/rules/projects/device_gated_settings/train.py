"""TF32 and cuDNN's benchmark set by the project's set-up helpers under a CUDA-device test: no GP302/GP304."""
import torch
from torch import nn

from common import compute_init, setup_backends

device_type = "cuda" if torch.cuda.is_available() else "cpu"
device = compute_init(device_type)
setup_backends(device)
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).to(device)
model = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
for step in range(100):
    x = torch.randn(32, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    with torch.autocast(device_type, dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
