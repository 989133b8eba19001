import torch
from torch.utils.data import DataLoader

from kgraph.iterators import AlternatingBatches


def train(model, head_set, tail_set, steps, workers):
    batches = AlternatingBatches(
        DataLoader(head_set, batch_size=512, shuffle=True, num_workers=max(1, workers // 2), pin_memory=True),
        DataLoader(tail_set, batch_size=512, shuffle=True, num_workers=max(1, workers // 2), pin_memory=True),
    )
    opt = torch.optim.Adam(model.parameters(), fused=True)
    for _ in range(steps):
        pos, neg = next(batches)
        loss = model(pos.cuda(), neg.cuda())
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    train(None, None, None, 10, 8)
