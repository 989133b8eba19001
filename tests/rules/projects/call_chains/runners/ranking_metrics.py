import torch


def hit_rates(scores, labels, ks):
    out = {}
    ranked = scores.argsort(dim=1, descending=True)
    for k in ks:
        hits = (ranked[:, :k] == labels[:, None]).float()
        out[f"hit@{k}"] = hits.sum(1).mean().cpu().item()
        discounts = 1.0 / torch.log2(torch.arange(2, k + 2).float()).to(scores.device)
        out[f"ndcg@{k}"] = (hits * discounts).sum(1).mean().cpu().item()
    return out
