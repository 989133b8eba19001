from contextlib import suppress

import torch


def get_autocast(precision):
    if precision == "amp":
        return torch.cuda.amp.autocast
    elif precision in ("amp_bfloat16", "amp_bf16"):
        return lambda: torch.cuda.amp.autocast(dtype=torch.bfloat16)
    else:
        return suppress


def train_one_epoch(args, model, loader, optimizer, device):
    autocast = get_autocast(args.precision)
    model.train()
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
        with autocast():
            loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
