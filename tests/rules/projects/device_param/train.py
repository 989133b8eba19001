import torch

from engine import Trainer


def main():
    device = torch.device("cuda")
    engine = Trainer(device, num_nodes=207)
    for epoch in range(10):
        for _ in range(100):
            x = torch.randn(64, 207, 32, device=device)
            engine.train(x, x)


if __name__ == "__main__":
    main()
