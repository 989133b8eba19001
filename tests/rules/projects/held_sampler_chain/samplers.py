# Depth samplers: the error-bounded sampler asks the uniform sampler it holds for a first guess.
import torch


class UniformSampler:
    def __init__(self, n_samples):
        self.n_samples = n_samples

    def get_z_vals(self, rays):
        t_vals = torch.linspace(0.0, 1.0, steps=self.n_samples).cuda()
        return rays[..., :1] * (1.0 - t_vals) + rays[..., 1:2] * t_vals


class ErrorBoundSampler:
    def __init__(self, n_samples):
        self.uniform_sampler = UniformSampler(n_samples)

    def get_z_vals(self, rays):
        z_vals = self.uniform_sampler.get_z_vals(rays)
        return torch.sort(z_vals, dim=-1)[0]
