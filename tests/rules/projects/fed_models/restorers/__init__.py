"""A builder that picks the model class from the options (the caller never names the class)."""
from .restore_model import RestoreModel
from .stream_model import StreamModel


def build_model(opt, net, device):
    if opt.get("stream"):
        return StreamModel(net, device)
    return RestoreModel(net, device)
