"""Entry: parses the config, lets cuDNN time its convolutions, hands over to the runner."""
import argparse

import torch

from runners.denoise import Runner


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    Runner(args, torch.device("cuda" if torch.cuda.is_available() else "cpu")).train()


if __name__ == "__main__":
    main()
