"""A second entry point, nanoGPT/build-nanogpt style: the batch comes from the loader's next_batch()."""
import torch

from data import TokenLoader
from model import GPT, GPTConfig

device = "cuda" if torch.cuda.is_available() else "cpu"
config = GPTConfig()
model = GPT(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, fused=device == "cuda")
train_loader = TokenLoader("data/train.bin", 16, 1024)
for step in range(config.max_iters):
    x, y = train_loader.next_batch()
    x, y = x.to(device), y.to(device)
    logits, loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
