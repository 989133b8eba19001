# main() builds the model and hands it to do_train(), which runs the epochs of engine.py.
import torch
from torch import nn

from engine import train_one_epoch


def build_model(args):
    model = nn.Sequential(nn.Linear(3, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, nn.CrossEntropyLoss()


def do_train(args, model, criterion, optimizer, loader):
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, loader, optimizer, torch.device("cuda"))


def main(args, loader):
    model, criterion = build_model(args)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    do_train(args, model, criterion, optimizer, loader)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1080)
    parser.add_argument("--lr", type=float, default=5e-4)
    main(parser.parse_args(), loader=[])
