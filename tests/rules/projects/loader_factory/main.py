import argparse

from data.loaders import make_loader
from solver import Solver

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", default="images/")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    Solver(make_loader(args.images, 32, args.workers)).fit(epochs=20)
