import argparse

import torch

from engine import train
from textdata import build_iterator


class Config:
    def __init__(self, args):
        self.batch_size, self.lr, self.epochs = args.batch_size, args.lr, args.epochs
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=10)
    cfg = Config(parser.parse_args())
    rows = torch.load("rows.pt")
    model = torch.nn.EmbeddingBag(5000, 10).to(cfg.device)
    train(cfg, model, build_iterator(rows["train"], cfg), build_iterator(rows["dev"], cfg))


if __name__ == "__main__":
    main()
