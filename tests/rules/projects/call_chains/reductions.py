def masked_mean(values, mask):
    count = mask.sum().item()
    return (values * mask).sum() / max(count, 1)
