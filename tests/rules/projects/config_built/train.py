import argparse

import torch

import loop
from tools.registry import Options


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-4)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    net_options = Options(class_name="nets.denoiser.Denoiser", channels=args.channels)
    optim_options = Options(class_name="torch.optim.Adam", lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    dataset = torch.utils.data.TensorDataset(torch.randn(256, 3, 32, 32))
    loop.run(dataset, net_options, optim_options)


if __name__ == "__main__":
    main()
