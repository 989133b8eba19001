import argparse

import torch

from amp_trainers import train_amp
from segment.net import SegNet

if __name__ == "__main__":
    args = argparse.ArgumentParser().parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    net = SegNet(num_classes=9).cuda()
    net.compile()
    {"amp": train_amp}[args.mode](args, net, "runs/amp")
