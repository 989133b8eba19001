import argparse


class Options:
    def __init__(self):
        self.parser = argparse.ArgumentParser(description="time-series transformer")
        self.parser.add_argument("--optimizer", choices={"Adam", "RAdam"}, default="Adam", help="Optimizer")
        self.parser.add_argument("--lr", type=float, default=1e-3)
        self.parser.add_argument("--epochs", type=int, default=100)
        self.parser.add_argument("--num_workers", type=int, default=4)

    def parse(self):
        return self.parser.parse_args()
