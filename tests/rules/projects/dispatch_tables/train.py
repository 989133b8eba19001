import argparse

import torch

from segment.net import SegNet
from trainers import trainer_acdc, trainer_synapse

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default="Synapse")
parser.add_argument("--num_classes", type=int, default=9)

if __name__ == "__main__":
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    net = SegNet(num_classes=args.num_classes).cuda()
    trainer = {"Synapse": trainer_synapse, "ACDC": trainer_acdc}
    trainer[args.dataset](args, net, "runs/seg")
