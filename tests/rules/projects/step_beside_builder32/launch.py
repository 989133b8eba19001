import json
import sys

import torch

from pipeline import solver

if __name__ == "__main__":
    cfg = json.load(open(sys.argv[1]))
    solver.run(cfg, torch.load(cfg["data"]))
