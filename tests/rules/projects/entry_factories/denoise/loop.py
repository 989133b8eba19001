import torch
from torch.nn.parallel import DistributedDataParallel


class DenoiseLoop:
    def __init__(self, *, model, schedule, batches, lr, use_ddp=False):
        self.model = model
        self.schedule = schedule
        self.batches = batches
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, fused=True)
        self.net = DistributedDataParallel(model, gradient_as_bucket_view=True) if use_ddp else model

    def run(self):
        for x in self.batches:
            t = torch.randint(0, self.schedule.steps, (x.shape[0],), device=x.device)
            loss = (self.net(x, t) - x).pow(2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
