"""A world model trained through the optimizer wrapper: the loop that calls _train is elsewhere."""
import torch
from torch import nn

import tools


class WorldModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 16)
        self.decoder = nn.Linear(16, 16)
        self._model_opt = tools.Optimizer("model", self.parameters(), 1e-4)

    def _train(self, data):
        embed = self.encoder(data)
        recon = self.decoder(embed)
        rec_loss = torch.mean((recon - data) ** 2)
        metrics = self._model_opt(rec_loss, self.parameters())
        metrics["rec_loss"] = tools.to_np(rec_loss)
        metrics.update(tools.tensorstats(embed.detach(), "embed"))
        return metrics
