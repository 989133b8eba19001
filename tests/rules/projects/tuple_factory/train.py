import argparse

import torch

from utils.build import build_model


def main(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, optimizer = build_model(args, device, train=True)
    vocoder = build_model(args, device)  # inference only: not the trained model
    dataset = torch.utils.data.TensorDataset(torch.randn(256, 80), torch.randn(256, 80))
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True)
    for epoch in range(args.epochs):
        for mel, target in loader:
            mel, target = mel.to(device), target.to(device)
            loss = torch.nn.functional.l1_loss(model(mel), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step_and_update_lr()
    with torch.no_grad():
        vocoder(mel)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    main(parser.parse_args())
