import torch

from pkg.net import build_model


def setup_model(opt):
    model, criterion = build_model(opt)
    if opt.device.type == "cuda":
        model.to(opt.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=opt.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, opt.lr_drop)
    return model, criterion, optimizer, scheduler


@torch.no_grad()
def evaluate(model, loader, device):
    return sum(model(x.to(device)).sum() for x in loader)
