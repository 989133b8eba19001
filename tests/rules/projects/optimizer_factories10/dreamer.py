import torch
from torch import nn

import tools


def main():
    device = torch.device("cuda")
    world = nn.GRU(256, 256).to(device)
    opt = tools.Optimizer("model", world.parameters(), 1e-4, clip=100)
    for step in range(100000):
        x = torch.randn(64, 16, 256, device=device)
        loss = world(x)[0].pow(2).mean()
        opt(loss, world.parameters())


if __name__ == "__main__":
    main()
