import json
import sys

from utils.paths import *


def mean_score(history):
    total = 0.0
    for entry in history:
        total += entry.item()
    return total / max(len(history), 1)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(mean_score(json.load(f)), results_dir())
