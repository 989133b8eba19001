from .segnet_model import SegNet
