import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard_transformer(model, mesh, compute_dtype="bf16"):
    # every block and the root computes in the policy's dtype; gradients are reduced in float32
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[compute_dtype]
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model
