"""Trains the denoiser: everything is built by the package (the script imports no torch)."""
import argparse

from denoise.data import image_batches
from denoise.factory import create_unet_and_schedule, unet_defaults
from denoise.loop import DenoiseLoop


def main():
    parser = argparse.ArgumentParser()
    for key, value in unet_defaults().items():
        parser.add_argument(f"--{key}", type=type(value), default=value)
    parser.add_argument("--image_size", type=int, default=64)
    args = parser.parse_args()
    unet, schedule = create_unet_and_schedule(args.channels, args.width, args.steps)
    DenoiseLoop(model=unet, schedule=schedule, batches=image_batches(args.image_size, 8), lr=1e-4).run()


if __name__ == "__main__":
    main()
