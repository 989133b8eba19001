"""Builds the model named by the configuration's "type"."""
from .backbones import MLPMixer, ResNetLike

MODELS = {"resnet": ResNetLike, "mixer": MLPMixer}


def build_model(cfg):
    cfg = dict(cfg)
    model_cls = MODELS[cfg.pop("type")]
    return model_cls(**cfg)
