import torch

from data import create_dataloader
from data.splits import split_loaders
from engine import run
from options.train_options import TrainOptions


def main():
    opt = TrainOptions().parse()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.ReLU(), torch.nn.Conv2d(64, 3, 3)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr, fused=True)
    loader = create_dataloader(opt)
    train_loader, val_loader = split_loaders(opt.dataroot, batch_size=opt.batch_size, num_workers=opt.workers)
    for epoch in range(opt.niter):
        for images in loader:
            images = images.cuda(non_blocking=True)
            loss = model(images).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        for images in train_loader:
            images = images.cuda(non_blocking=True)
            loss = model(images).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    run(vars(opt), model, optimizer)


if __name__ == "__main__":
    main()
