import argparse

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from samplers import LossTrackingSampler, UniformSampler
from trainer import DistillTrainer
from nets import Denoiser
from data import ImageFolder


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sampler", default="uniform", choices=["uniform", "loss"])
    args = parser.parse_args()
    dist.init_process_group("nccl")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    model = Denoiser().cuda()
    model.compile()
    sampler = LossTrackingSampler(1000) if args.sampler == "loss" else UniformSampler(1000)
    loader = DataLoader(ImageFolder("data"), batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
    DistillTrainer(model, loader, sampler=sampler).run()


if __name__ == "__main__":
    main()
