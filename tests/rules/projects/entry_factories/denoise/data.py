import torch


def image_batches(size, batch_size):
    while True:
        yield torch.randn(batch_size, 3, size, size)
