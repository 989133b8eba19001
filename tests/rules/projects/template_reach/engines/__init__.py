from .engine import Engine
from .image.softmax import ImageSoftmaxEngine
from .image.triplet import ImageTripletEngine
