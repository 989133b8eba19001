import argparse

import torch
from torch.utils.data import DataLoader

from engine import train_one_epoch
from models import create_model
from optim_factory import create_optimizer
from utils import NativeScaler


def main(args):
    device = torch.device(args.device)
    model = create_model(args.model, num_classes=args.num_classes)
    model.to(device)
    optimizer = create_optimizer(args, model)
    loss_scaler = NativeScaler()
    criterion = torch.nn.CrossEntropyLoss()
    dataset = torch.load(args.data)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=8, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, loader, optimizer, device, loss_scaler, clip_grad=args.clip_grad)
        torch.save(model.state_dict(), f"checkpoint_{epoch}.pth")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="convnet_small")
    parser.add_argument("--opt", default="adamw")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--clip-grad", type=float, default=None)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--data", default="train.pt")
    main(parser.parse_args())
