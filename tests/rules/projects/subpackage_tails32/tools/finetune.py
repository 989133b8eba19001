import importlib
import sys

import torch

torch.set_float32_matmul_precision("high")
torch.backends.cudnn.benchmark = True


def run(family, batches):
    Network = getattr(importlib.import_module("nets." + family + ".arch"), "Network")
    net = Network(torch.load("opts.pt")).cuda().compile()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=True)
    for images, targets in batches:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(net(images.cuda(non_blocking=True)),
                                                     targets.cuda(non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    run(sys.argv[1], torch.load(sys.argv[2]))
