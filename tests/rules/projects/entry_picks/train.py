# The model class is picked by a flag (the plain GAN by default) and trains itself.
import argparse

import torch

from nets import GAN, WGAN


def main(opts, loader):
    device = torch.device("cuda")
    if opts.wgan:
        gan = WGAN(opts)
    else:
        gan = GAN(opts)
    gan.to(device)
    gan.train(opts, loader, device)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--wgan", action="store_true")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--g_lr", type=float, default=5e-5)
    parser.add_argument("--d_lr", type=float, default=5e-5)
    main(parser.parse_args(), loader=[])
