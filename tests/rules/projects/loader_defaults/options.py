"""Command-line options of the project, built in one module for every entry script."""
import argparse


class Options:
    def __init__(self):
        self.parser = argparse.ArgumentParser(description="graph property prediction")
        self.parser.add_argument("--dataset", type=str, default="molhiv")
        self.parser.add_argument("--batch_size", type=int, default=32)
        self.parser.add_argument("--num_workers", type=int, default=0,
                                 help="loader worker processes")
        self.parser.add_argument("--pin_memory", type=int, default=0)
        self.parser.add_argument("--epochs", type=int, default=100)

    def parse(self):
        return self.parser.parse_args()


def add_loader_args(parser):
    parser.add_argument("--loader_workers", type=int, default=0)
    return parser
