import argparse

import torch

from kge.models import Bilinear, Diagonal
from kge.trainer import EpochRunner

parser = argparse.ArgumentParser(description="knowledge base completion")
parser.add_argument("--model", choices=["Bilinear", "Diagonal"], default="Bilinear")
parser.add_argument("--rank", type=int, default=1000)
parser.add_argument("--epochs", type=int, default=50)
args = parser.parse_args()

sizes = (14951, 1345)
examples = torch.randint(0, 1345, (100000, 3)).cuda()
model = {
    "Bilinear": lambda: Bilinear(sizes, args.rank),
    "Diagonal": lambda: Diagonal(sizes, args.rank),
}[args.model]()
model.cuda()
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1)
runner = EpochRunner(model, optimizer)
for e in range(args.epochs):
    runner.epoch(examples)
