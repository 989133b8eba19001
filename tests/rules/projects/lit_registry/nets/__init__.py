from .base import *
from .plain import *
from .gated import *

Default = PlainAE

autoencoders = {"plain": PlainAE, "gated": GatedAE, "default": Default}
