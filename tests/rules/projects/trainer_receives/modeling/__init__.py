from .backbones import MLPMixer, ResNetLike
from .build import build_model
