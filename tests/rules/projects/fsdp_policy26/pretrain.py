import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from lmkit.model import TinyLM
from lmkit.sharding import shard_transformer


def main(batches, steps=1000):
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    model = TinyLM().cuda()
    model = shard_transformer(model, mesh)
    torch.set_float32_matmul_precision("high")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    for step, (tokens, labels) in zip(range(steps), batches):
        logits = model(tokens.cuda(non_blocking=True))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.cuda(non_blocking=True).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main([])
