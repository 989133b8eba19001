import torch.nn.functional as F

from nets import NETWORKS


class Retrieval:
    def __init__(self, args):
        self.args = args

    def make_network(self, args):
        return NETWORKS["mlp"](args.width)

    def loss(self, net, batch):
        q, k = net(batch["q"]), net(batch["k"])
        return F.cross_entropy(q @ k.T, batch["y"])
