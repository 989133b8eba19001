from dataclasses import dataclass, field
from typing import Any, Dict, Optional


@dataclass
class LoaderSettings:
    """Settings of the data pipeline; users build it in code (``LoaderSettings(batch_size=512)``)."""

    batch_size: int = 256
    num_workers: Optional[int] = field(default=0, metadata={"help": "loader processes; 0 loads in the main process"})
    loader_kwargs: Dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimSettings:
    lr: float = 1e-3
    warmup_steps: int = 0
