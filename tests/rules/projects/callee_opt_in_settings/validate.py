import argparse

import torch
import torch.backends.cudnn as cudnn

parser = argparse.ArgumentParser()
parser.add_argument("--video", default=None)
parser.add_argument("--images", type=int, default=100)
opts = parser.parse_args([])


def run_on_video(net, path):
    cudnn.benchmark = True  # frames of one fixed size: only this demo path benchmarks
    for frame in read_frames(path):
        net(frame.cuda())


def read_frames(path):
    return [torch.zeros(1, 3, 480, 640)]


@torch.no_grad()
def validate(net, dataset):
    if opts.video is not None:
        run_on_video(net, opts.video)
        return None
    net.eval()
    scores = [net(image.cuda()).sigmoid().mean() for image in dataset[:opts.images]]
    net.train()
    return torch.stack(scores).mean().item()
