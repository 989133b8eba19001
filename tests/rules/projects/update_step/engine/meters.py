import torch


def summarize(stats):
    """Host floats of a step's statistics."""
    return {k: float(torch.stack([v]).mean()) if torch.is_tensor(v) else v for k, v in stats.items()}


def running_mean(history):
    return {k: torch.stack(v).mean().item() for k, v in history.items()}
