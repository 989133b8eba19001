import argparse


class BaseOptions:
    def __init__(self):
        self.parser = argparse.ArgumentParser()
        self.parser.add_argument("--dataroot", type=str, default="./frames")
        self.parser.add_argument("--batch_size", type=int, default=4)
        self.parser.add_argument("--fp16", action="store_true", help="train with apex mixed precision")

    def parse(self):
        return self.parser.parse_args()
