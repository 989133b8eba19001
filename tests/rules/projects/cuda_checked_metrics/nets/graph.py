import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

from common.scores import accuracy_and_f1


class NodeClassifier(torch.nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.proj = torch.nn.Linear(dim, classes)

    def forward(self, x):
        return self.proj(x)

    def evaluate(self, feats, graph, split):
        idx = graph["idx_" + split]
        out = F.log_softmax(self.proj(feats[idx]), dim=1)
        loss = F.nll_loss(out, graph["labels"][idx])
        acc, f1 = accuracy_and_f1(out, graph["labels"][idx])
        return {"loss": loss, "acc": acc, "f1": f1}


class LinkScorer(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)

    def evaluate(self, feats, graph, split):
        pos = torch.sigmoid((feats[graph[split][:, 0]] * feats[graph[split][:, 1]]).sum(-1))
        neg = torch.sigmoid((feats[graph["neg"][:, 0]] * feats[graph["neg"][:, 1]]).sum(-1))
        loss = F.binary_cross_entropy(pos, torch.ones_like(pos)) + F.binary_cross_entropy(neg, torch.zeros_like(neg))
        if pos.is_cuda:
            pos = pos.cpu()
            neg = neg.cpu()
        labels = [1] * pos.shape[0] + [0] * neg.shape[0]
        roc = roc_auc_score(labels, list(pos.detach().numpy()) + list(neg.detach().numpy()))
        return {"loss": loss, "roc": roc}
