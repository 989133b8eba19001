import torch


def gradient_penalty(disc, real, fake):
    eps = torch.rand(real.size(0), 1, 1, 1)
    eps = eps.to(real.device)
    mixed = (eps * real + (1 - eps) * fake).requires_grad_(True)
    grad, = torch.autograd.grad(disc(mixed).sum(), mixed, create_graph=True)
    return ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
