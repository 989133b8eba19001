import argparse

import torch
from torch.utils.data import DataLoader

from data import GraphFiles
from options import Options, add_loader_args


def main():
    args = Options().parse()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = GraphFiles(args.dataset)
    train_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.num_workers, pin_memory=args.pin_memory)
    valid_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                              num_workers=args.num_workers)
    model = torch.nn.Linear(16, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in valid_loader:
                model(x.to(device))


def tune():
    parser = add_loader_args(argparse.ArgumentParser())
    args = parser.parse_args()
    loader = DataLoader(GraphFiles("zinc"), batch_size=64, num_workers=args.loader_workers)
    for epoch in range(10):
        for batch in loader:
            pass


if __name__ == "__main__":
    main()
