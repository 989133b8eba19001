import argparse

import torch

from painter.solver import Solver


def main(mode=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", type=int, default=1)
    parser.add_argument("--data", default="data/")
    args = parser.parse_args()
    mode = mode or args.mode
    if torch.cuda.is_available():
        device = torch.device("cuda")
        torch.backends.cudnn.benchmark = True  # fixed-size crops
    else:
        device = torch.device("cpu")
    solver = Solver(args.data, device)
    if mode == 1:
        solver.train()
    else:
        solver.test()


if __name__ == "__main__":
    main()
