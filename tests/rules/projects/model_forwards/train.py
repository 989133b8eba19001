"""A point-cloud / sequence project laid out like many research repositories: the entry picks the
model module by name (importlib), the models call helpers of their own module, of ``layers/``
and of ``ops/``; no model file holds a loop."""
import argparse
import importlib

import torch
from torch.utils.data import DataLoader

from data import PointClouds


def main(args):
    device = torch.device("cuda")
    net = importlib.import_module("models." + args.model).get_model(args.classes).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    loader = DataLoader(PointClouds("data"), batch_size=24, shuffle=True, num_workers=8, pin_memory=True)
    for epoch in range(args.epochs):
        for points, target in loader:
            points = points.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(net(points), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="set_net")
    parser.add_argument("--classes", type=int, default=40)
    parser.add_argument("--epochs", type=int, default=100)
    main(parser.parse_args())
