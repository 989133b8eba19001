from torch.utils.data import DataLoader

from yamlcfg.options import StreamConfig


def stream_loader(dataset, stream_config: StreamConfig):
    return DataLoader(dataset, batch_size=stream_config.batch_size, num_workers=stream_config.num_workers)
