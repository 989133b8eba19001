from .decoder import Decoder
from .schedule import WarmupOptim
