"""The learner class is looked up by name in the package, then built."""
import sys

import torch

import learners


def main(name, loader):
    learner = getattr(learners, name)({"device": "cuda", "lr": 1e-3})
    step = 0
    while step < 10_000:
        for batch in loader:
            learner.learn(batch)
            step += 1


if __name__ == "__main__":
    torch.manual_seed(0)
    main(sys.argv[1], [])
