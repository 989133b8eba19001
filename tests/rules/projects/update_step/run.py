import argparse

import torch

from engine.meters import running_mean, summarize
from engine.updater import Updater
from model import make_net, make_stream


def train(args, updater, stream):
    history = {"loss": []}
    for step, group in enumerate(stream):
        stats = updater.update(group)
        if stats is None:
            continue
        history["loss"].append(stats["loss"])
        means = running_mean(history)
        if step % args.log_every == 0:
            print(step, summarize(stats), means, updater.lr())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-every", type=int, default=100)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    net = make_net()
    net.compile()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=True)
    train(args, Updater(net, opt), make_stream())


if __name__ == "__main__":
    main()
