import torch
from torch.utils.data import DataLoader

from tools.devices import cast_all, map_to_cuda, move_pinned, move_weights, shard_and_move, to_cuda


def train(model, dataset, args):
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    class_weights = move_weights([torch.ones(10)], args.device)
    for epoch in range(args.epochs):
        for step, batch in enumerate(loader):
            to_cuda(batch, args.gpuid)
            inputs = map_to_cuda(batch["inputs"])
            chunk = shard_and_move(batch, args.rank, args.world_size, args.device)
            pinned = move_pinned(batch, args.device)
            halves = cast_all([chunk["x"]], torch.float16)
            loss = model(inputs, chunk, pinned, halves, class_weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
