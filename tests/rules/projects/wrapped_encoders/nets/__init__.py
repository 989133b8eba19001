from .backbones import get_backbone
from .heads import ContrastiveModel
