import argparse

import torch
from torch import nn

from optim_factory import build_optimizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optim", default="Adam")
    parser.add_argument("--aux-optim", default="SGD")
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backbone = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()).to(device)
    head = nn.Linear(64, 10).to(device)
    aux = nn.Linear(64, 10).to(device)
    opt = getattr(torch.optim, args.optim)(backbone.parameters(), lr=args.lr)
    aux_opt = getattr(torch.optim, args.aux_optim)(aux.parameters(), lr=args.lr)
    head_opt = build_optimizer(head)
    loader = torch.utils.data.DataLoader(dataset(), batch_size=64, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        feats = backbone(x)
        loss = nn.functional.cross_entropy(head(feats), y) + nn.functional.cross_entropy(aux(feats), y)
        for o in (opt, aux_opt, head_opt):
            o.zero_grad()
        loss.backward()
        for o in (opt, aux_opt, head_opt):
            o.step()


if __name__ == "__main__":
    main()
