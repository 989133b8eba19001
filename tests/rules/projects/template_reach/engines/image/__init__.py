from .softmax import ImageSoftmaxEngine
from .triplet import ImageTripletEngine
