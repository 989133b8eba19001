from .registry import create_model, list_models, register_model
from .convnets import *
from .vit import *
