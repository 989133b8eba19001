import sys

import torch
import yaml

from nets.encoder import Encoder
from optim_utils import OPTIMIZERS


def main(config_path):
    with open(config_path) as f:
        cfg = yaml.safe_load(f)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = Encoder(cfg["model"]["dim"]).cuda()
    optimizer = OPTIMIZERS[cfg["optim"]["name"]](model.parameters(), **cfg["optim"]["kwargs"])
    for x, y in cfg["loader"]:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(sys.argv[1])
