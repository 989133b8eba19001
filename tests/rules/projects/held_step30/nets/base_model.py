import torch

from .penalties import gradient_penalty


class BaseGANModel:
    """A GAN that runs its own training step (both optimizers) on each batch it is given."""

    def __init__(self, latent_dim, device="cuda"):
        self.latent_dim = latent_dim
        self.device = device
        self.mean_brightness = 0.0

    def sample_latent(self, n):
        return torch.randn(n, self.latent_dim).to(self.device)

    def train_on_batch(self, real):
        real = real.to(self.device)
        self.opt_d.zero_grad(set_to_none=True)
        fake = self.gen(self.sample_latent(real.size(0))).detach()
        loss_d = self.disc(fake).mean() - self.disc(real).mean()
        gp = gradient_penalty(self.disc, real, fake)
        (loss_d + 10.0 * gp).backward()
        self.opt_d.step()

        self.opt_g.zero_grad(set_to_none=True)
        loss_g = -self.disc(self.gen(self.sample_latent(real.size(0)))).mean()
        loss_g.backward()
        self.opt_g.step()
        return {"loss_d": loss_d.item(), "loss_g": loss_g.item()}

    def refresh_stats(self, images):
        # runs no step: a pass of the trainer's plain loop is not seen as one through it
        self.mean_brightness = images.mean().item()

    def save(self, path):
        torch.save({"gen": self.gen.state_dict(), "disc": self.disc.state_dict()}, path)
