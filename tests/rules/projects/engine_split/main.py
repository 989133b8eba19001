"""An image classifier laid out like DeiT/timm's reference scripts: main.py builds, engine.py trains."""
import argparse

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

import models
import utils
from engine import evaluate, train_one_epoch


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="resnet18")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--wd", type=float, default=1e-4)
    return parser.parse_args()


def main(args):
    device = torch.device("cuda")
    train_set = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
    loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=8,
                        pin_memory=True, persistent_workers=True)
    model = models.build_model(args.arch, num_classes=10)
    model.to(device)
    param_groups = utils.add_weight_decay(model, args.wd)
    optimizer = torch.optim.SGD(param_groups, lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        train_one_epoch(model, loader, optimizer, device, epoch)
        evaluate(model, loader, device)


if __name__ == "__main__":
    main(get_args())
