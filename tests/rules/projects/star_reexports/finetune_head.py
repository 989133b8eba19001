from common import *

seed_all(0)
device = "cuda"
head = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
opt = optim.AdamW(head.parameters(), lr=1e-3)

for step in range(500):
    feats = FloatTensor(256, 128).normal_().to(device)
    logits = head(feats)
    loss = logits.logsumexp(dim=1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(step, loss.item())
