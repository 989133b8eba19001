"""A restoration-style toolkit: the solver class is imported in the branch the options choose
(each solver builds, steps and logs its own networks), the loader comes from a helper that hands
the caller's keywords to a loader class it is given, DataLoader by default."""
import json
import sys

import torch

from data import PatchDataset, make_loader
from solvers import make_solver


def main(path):
    with open(path) as f:
        opt = json.load(f)
    loader = make_loader(PatchDataset(opt["root"], patch=96), batch_size=16, shuffle=True,
                         num_workers=opt["workers"], drop_last=True)
    solver = make_solver(opt)
    step = 0
    for epoch in range(opt["epochs"]):
        for batch in loader:
            step += 1
            solver.feed(batch)
            solver.update(step)
            if step % opt["save_every"] == 0:
                solver.save(step)


if __name__ == "__main__":
    main(sys.argv[1])
