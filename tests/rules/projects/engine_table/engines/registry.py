from .segmentation import SegmentationEngine
from .depth import DepthEngine

ENGINES = {"segmentation": SegmentationEngine, "depth": DepthEngine}
