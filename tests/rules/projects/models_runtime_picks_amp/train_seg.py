"""Segmentation: the network is named by the config (nets.<arch>.get_net) and evaluated by name."""
import argparse

import torch

import nets

torch.set_float32_matmul_precision("high")
torch.backends.cudnn.benchmark = True
from engine import run_epoch
from data import make_loader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="fcn")
    parser.add_argument("--classes", type=int, default=21)
    cfg = parser.parse_args()
    net = eval("nets." + cfg.arch + ".get_net")(cfg)
    net = net.cuda()
    net.compile()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, fused=True)
    loader = make_loader(cfg)
    for epoch in range(50):
        run_epoch(cfg, loader, optimizer, net)


if __name__ == "__main__":
    main()
