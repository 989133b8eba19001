import torch


def to_cuda(batch, gpuid):
    # moves the batch dict in place
    for n in batch:
        if n != "meta":
            batch[n] = batch[n].to(gpuid)


def shard_and_move(batch, rank, world_size, device):
    size = len(next(iter(batch.values()))) // world_size
    sliced = {k: v[rank * size:(rank + 1) * size] for k, v in batch.items()}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in sliced.items()}


def map_to_cuda(tensor_dict):
    out = {}
    for key, value in tensor_dict.items():
        out[key] = value.cuda()
    return out


def cast_all(tensors, dtype):
    return [t.to(dtype) for t in tensors]


def move_pinned(batch, device):
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def move_weights(weights, device):
    return [w.to(device) for w in weights]
