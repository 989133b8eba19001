import argparse

import torch

import optim_utils
from nets.encoder import Encoder

parser = argparse.ArgumentParser()
parser.add_argument("--opt", default="adamw")
parser.add_argument("--lr", type=float, default=3e-4)

if __name__ == "__main__":
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    model = Encoder(256).to("cuda")
    optimizer = optim_utils.OPTIMIZERS.get(args.opt)(model.parameters(), lr=args.lr)
    other = optim_utils.ANY_OPTIMIZER[args.opt](model.parameters(), lr=args.lr)
    own = optim_utils.OWN_OPTIMIZERS[args.opt](model.parameters(), lr=args.lr)
    for x in torch.randn(100, 8, 256, device="cuda"):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
