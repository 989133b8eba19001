"""An evaluation helper module: pretrain.py calls it through the module under `iter_num % eval_interval`."""
import torch


@torch.no_grad()
def estimate_loss(model, val_loader, device):
    model.eval()
    losses = []
    for x, y in val_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
    model.train()
    return sum(losses) / len(losses)
