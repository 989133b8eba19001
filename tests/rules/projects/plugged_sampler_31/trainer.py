import torch

from samplers import LossTrackingSampler, UniformSampler


class DiffusionTrainer:
    def __init__(self, model, loader, num_timesteps=1000, sampler=None, lr=1e-4):
        self.model = model
        self.loader = loader
        self.sampler = sampler or UniformSampler(num_timesteps)
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)

    def run(self):
        for x in self.loader:
            self.run_step(x.cuda(non_blocking=True))

    def run_step(self, x):
        t, weights = self.sampler.sample(x.size(0), x.device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            losses = self.model.losses(x, t)
        if isinstance(self.sampler, LossTrackingSampler):
            self.sampler.update_with_local_losses(t, losses.detach())
        loss = (losses * weights).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class DistillTrainer(DiffusionTrainer):
    def run_step(self, x):
        t, weights = self.sampler.sample(x.size(0), x.device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            losses = self.model.distill_losses(x, t)
        if isinstance(self.sampler, LossTrackingSampler):
            self.sampler.update_with_local_losses(t, losses.detach())
        loss = (losses * weights).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
