"""A robomimic-style engine: it is handed the algorithm object and never imports its class."""
from torch.utils.data import DataLoader


def run_epoch(algo, loader: DataLoader) -> None:
    for batch in loader:
        info = algo.train_on_batch(batch)
        algo.log_info(info)
