from .core import *
from .gan import *
