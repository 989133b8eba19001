"""A sweep over the convolutional forecasters: the script's own table of the package's classes."""
import argparse

import torch

from nets.convs import DilatedConvNet, ResidualConvNet

CONV_NETS = {"tcn": DilatedConvNet, "residual": ResidualConvNet}


def run(cfg, arch):
    model = CONV_NETS[arch](cfg).to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, fused=True)
    data = torch.utils.data.TensorDataset(torch.randn(256, cfg.seq_len, cfg.channels))
    for (x,) in torch.utils.data.DataLoader(data, batch_size=32, num_workers=2, pin_memory=True,
                                           persistent_workers=True):
        loss = model(x.to("cuda", non_blocking=True)).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seq_len", type=int, default=96)
    parser.add_argument("--channels", type=int, default=7)
    args = parser.parse_args()
    for name in CONV_NETS:
        run(args, name)
