"""A factory of another module returns (model, loss, optimizer): only the model is compiled."""
import argparse

import torch

from denoise.setup_all import setup


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net, criterion, optimizer = setup(args)
    net.to(device)
    loader = torch.utils.data.DataLoader(torch.randn(64, 3, 32, 32), batch_size=8, num_workers=2,
                                         pin_memory=True, persistent_workers=True)
    for _ in range(2):
        for x in loader:
            x = x.to(device, non_blocking=True)
            t = torch.zeros(x.shape[0], device=device)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = criterion(net(x, t), x)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
