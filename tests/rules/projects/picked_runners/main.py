"""A trainer picked by the experiment's kind from a table of runner classes, the model from a
table of networks: the runner trains the model it is handed (its base class holds the loop)."""
import argparse

import torch

from nets import build_net
from runners import build_runner


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="tiny_transformer")
    parser.add_argument("--kind", default="supervised")
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args()
    data = torch.utils.data.TensorDataset(torch.randn(512, 32, 64), torch.randint(0, 10, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    net = build_net(args)
    runner = build_runner(args, net, loader)
    runner.fit(epochs=10)


if __name__ == "__main__":
    main()
