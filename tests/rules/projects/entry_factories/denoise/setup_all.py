import torch

from .unet import TinyUNet


def setup(args):
    net = TinyUNet(3, args.width)
    criterion = torch.nn.SmoothL1Loss()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, fused=True)
    return net, criterion, optimizer
