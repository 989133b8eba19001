from .loop import *
