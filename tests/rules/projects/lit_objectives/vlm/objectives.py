import torch
import torch.nn.functional as F


def compute_itm(pl_module, batch):
    pos_len = len(batch["text"]) // 2
    neg_len = len(batch["text"]) - pos_len
    itm_labels = torch.cat([torch.ones(pos_len), torch.zeros(neg_len)]).to(pl_module.device)
    itm_labels = itm_labels[torch.randperm(itm_labels.size(0))]
    logits = pl_module.itm_head(pl_module.infer(batch)["cls_feats"])
    return {"itm_loss": F.cross_entropy(logits, itm_labels.long())}


def compute_vqa(pl_module, batch):
    logits = pl_module.vqa_head(pl_module.infer(batch)["cls_feats"])
    targets = torch.zeros(len(logits), pl_module.hparams["vqa_labels"]).to(pl_module.device)
    for i, (labels, scores) in enumerate(zip(batch["vqa_labels"], batch["vqa_scores"])):
        for label, score in zip(labels, scores):
            targets[i, label] = score
    return {"vqa_loss": F.binary_cross_entropy_with_logits(logits, targets)}
