"""A distributed classifier laid out like the MAE/ConvNeXt reference scripts: main.py sets up the
processes, wraps the model in DDP and hands it to engine.py, which accumulates gradients by hand."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, models, transforms

from engine import evaluate, train_one_epoch


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--update_freq", type=int, default=4)
    return parser.parse_args()


def main(args):
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    train_set = datasets.ImageFolder("train", tf)
    test_set = datasets.ImageFolder("val", tf)
    sampler = DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=64, sampler=sampler, num_workers=8,
                              pin_memory=True, persistent_workers=True)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=8, pin_memory=True)
    model = models.resnet50().to(device)
    model = torch.compile(model)
    model = DistributedDataParallel(model, device_ids=[local_rank], gradient_as_bucket_view=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        train_one_epoch(model, train_loader, optimizer, device, args.update_freq)
    print(evaluate(model, test_loader, device))


if __name__ == "__main__":
    main(get_args())
