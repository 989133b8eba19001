"""Samples from a trained denoiser: builds the model, trains nothing (no finding)."""
import argparse

from denoise.factory import create_unet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    unet = create_unet(3, args.width)
    print(sum(p.numel() for p in unet.parameters()))


if __name__ == "__main__":
    main()
