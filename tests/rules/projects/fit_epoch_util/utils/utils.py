def get_lr(optimizer):
    return optimizer.param_groups[0]["lr"]
