from .models import ConvNet, TinyTransformer

NETS = {"conv": ConvNet, "tiny_transformer": TinyTransformer}


def build_net(args):
    return NETS[args.arch](width=64).cuda()
