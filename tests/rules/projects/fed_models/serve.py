import queue

import torch

from restorers.stream_model import StreamModel


def adapt_online(net, feed: queue.Queue, device, steps):
    model = StreamModel(net, device)
    for _ in range(steps):
        sample = feed.get()
        model.feed_sample(sample)
        model.adapt()


if __name__ == "__main__":
    adapt_online(None, queue.Queue(), torch.device("cuda"), 1000)
