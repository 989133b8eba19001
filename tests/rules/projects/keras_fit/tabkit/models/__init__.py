from .seqconv import FieldConv
from .wide import WideNet
