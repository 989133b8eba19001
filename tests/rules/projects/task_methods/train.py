"""Trains the network the problem builds; this file never names a device (the runner picks it)."""
import argparse

import torch

import problems
from runner import Runner


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="classify")
    parser.add_argument("--arch", default="mixer")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args()
    torch.manual_seed(0)
    problem = problems.get_problem(args)
    net = problem.make_network(args)
    runner = Runner(args, problem, net)
    for epoch in range(10):
        for batch in problem_batches(args):
            runner.step(batch)


if __name__ == "__main__":
    main()
