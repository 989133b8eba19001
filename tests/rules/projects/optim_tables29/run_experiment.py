import json
import sys

import torch

import optim
from nets import SegNet
from runners import Runner


def main(config):
    net = SegNet().cuda()
    make_optimizer = optim.lookup_optimizer(config["optimizer"])
    optimizer = make_optimizer(net.parameters(), lr=config["lr"])
    runner = Runner(net, loader, optimizer)
    for _ in range(config["epochs"]):
        runner.epoch()


if __name__ == "__main__":
    main(json.load(open(sys.argv[1])))
