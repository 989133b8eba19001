"""The same, with TF32 on: nothing to report about matmul precision."""
import argparse

import torch

import problems
from runner import Runner

torch.backends.cuda.matmul.allow_tf32 = True


def main(args):
    problem = problems.get_problem(args)
    runner = Runner(args, problem, problem.make_network(args))
    for batch in problem_batches(args):
        runner.step(batch)


if __name__ == "__main__":
    main(argparse.Namespace(problem="retrieve", arch="mlp", width=128, lr=1e-4))
