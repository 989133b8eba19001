import torch


def top1(logits, labels):
    return (logits.argmax(dim=1) == labels).float().mean().item()


def report(losses):
    return torch.stack(losses).mean().item()


def per_class(logits, labels):
    return (logits.argmax(dim=1) == labels).float().tolist()
