from dataclasses import dataclass


@dataclass
class RunArgs:
    data: str = "shards/"
    workers: int = 6
    keep_workers: bool = False
    epochs: int = 30
