import argparse

import torch

from algos import build_algo


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", default="ppo")
    args = parser.parse_args()
    policy = torch.nn.Linear(8, 1).cuda()
    algo = build_algo(args.algo, policy)
    loader = torch.utils.data.DataLoader(list(range(100)), batch_size=4, num_workers=2, pin_memory=True)
    for epoch in range(10):
        for batch in loader:
            algo.update(batch)


if __name__ == "__main__":
    main()
