# The renderer's forward samples depths on every call: the uniform sampler's steps too.
from torch import nn

from samplers import ErrorBoundSampler


class Renderer(nn.Module):
    def __init__(self, n_samples):
        super().__init__()
        self.sampler = ErrorBoundSampler(n_samples)
        self.density = nn.Linear(1, 1)

    def forward(self, rays):
        z_vals = self.sampler.get_z_vals(rays)
        return self.density(z_vals[..., None]).squeeze(-1)
