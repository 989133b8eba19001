from .segmenter import Segmenter

AVAILABLE = ["Segmenter"]


def build_net(cfg):
    kind = cfg.pop("kind")
    assert kind in AVAILABLE, kind
    return globals()[kind](**cfg)
