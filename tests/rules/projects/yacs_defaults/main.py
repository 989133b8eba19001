import argparse

import torch

from gnnlib.config import cfg
from gnnlib.loader import create_loaders


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cfg", dest="cfg_file", required=True)
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cfg.merge_from_file(args.cfg_file)
    cfg.merge_from_list(args.opts)
    data = torch.load("graphs.pt")
    train_loader, val_loader = create_loaders(data["train"], data["val"])
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.optim.base_lr, fused=True)
    for epoch in range(100):
        for x, y in train_loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
