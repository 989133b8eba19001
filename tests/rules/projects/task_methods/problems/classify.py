import torch.nn.functional as F

from nets import NETWORKS


class Classification:
    def __init__(self, args):
        self.args = args

    def make_network(self, args):
        return NETWORKS[args.arch](args.width)

    def loss(self, net, batch):
        return F.cross_entropy(net(batch["x"]), batch["y"])
