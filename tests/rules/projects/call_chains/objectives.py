import torch.nn.functional as F

from reductions import masked_mean


def total_loss(logits, labels, ignore=-1):
    per_item = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    return masked_mean(per_item, labels != ignore)
