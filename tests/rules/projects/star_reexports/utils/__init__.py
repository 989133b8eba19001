from utils.tensor_ops import *
from utils.paths import *
