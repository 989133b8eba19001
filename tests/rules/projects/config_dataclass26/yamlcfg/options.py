from dataclasses import dataclass

from omegaconf import OmegaConf


class FileBacked:
    @classmethod
    def load(cls, path):
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), OmegaConf.load(path)))


@dataclass
class StreamConfig(FileBacked):
    """Filled from the run's YAML file (``stream: num_workers: 16``): the class default is not the run's."""

    num_workers: int = 0
    batch_size: int = 8
