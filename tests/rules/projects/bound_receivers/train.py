"""The receivers of `update` here are bound in this file: a meter of the project, a dict, a progress
bar. None of them is a storage, whose `update` copies to the GPU: quiet."""
import torch
from tqdm import tqdm

from algos import AverageMeter


def main():
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(list(range(100)), batch_size=4, num_workers=2, pin_memory=True)
    meter = AverageMeter()
    stats = {}
    for epoch in range(10):
        pbar = tqdm(loader)
        for batch in pbar:
            x = batch.float().cuda(non_blocking=True)
            loss = model(x[:, None]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss.detach())
            stats.update(last=loss.detach())
            pbar.update(1)


if __name__ == "__main__":
    main()
