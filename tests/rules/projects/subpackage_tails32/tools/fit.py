import argparse
import importlib

import torch
from torch.utils.data import DataLoader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", default="mixer")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--classes", type=int, default=100)
    opts = parser.parse_args()
    net = getattr(importlib.import_module("nets.{}.arch".format(opts.family)), "Network")(opts).to("cuda")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    feeder = DataLoader(torch.load("shards.pt"), batch_size=128, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    for epoch in range(90):
        for images, targets in feeder:
            images = images.to("cuda", non_blocking=True)
            targets = targets.to("cuda", non_blocking=True)
            loss = torch.nn.functional.cross_entropy(net(images), targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
