import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tools import registry


class SingleProcess(torch.nn.Module):
    """Stands in for DistributedDataParallel when one process trains."""

    def __init__(self, module, **unused):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def run(dataset, net_options, optim_options, steps=1000, batch=32, device="cuda"):
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    net = registry.build_from_name(**net_options).to(device)
    net.train()
    optimizer = registry.build_from_name(params=net.parameters(), **optim_options)
    wrapped = (DistributedDataParallel if dist.is_initialized() else SingleProcess)(
        net, device_ids=[torch.cuda.current_device()], broadcast_buffers=False)
    batches = iter(loader)
    for step in range(steps):
        try:
            images = next(batches)
        except StopIteration:
            batches = iter(loader)
            images = next(batches)
        images = images.to(device, non_blocking=True)
        sigma = torch.rand(images.shape[0], device=device)
        noisy = images + sigma.view(-1, 1, 1, 1) * torch.randn_like(images)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = (wrapped(noisy, sigma) - images).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return net
