import torch
import torch.nn.functional as F

from agents.logger import EvalLogger, TrainLogger
from utils.buffers import EpisodeBuffer, ReplayBuffer
from utils.meters import MetricLogger


class Trainer:
    """The buffer and the logger are handed in: their classes are not known here."""

    buffer_classes = (ReplayBuffer, EpisodeBuffer)
    logger_classes = (TrainLogger, EvalLogger)

    def __init__(self, model, optimizer, buffer, logger):
        self.model = model
        self.optimizer = optimizer
        self.buffer = buffer
        self.logger = logger

    def train(self, steps, batch_size):
        meters = MetricLogger()
        for step in range(steps):
            obs, rew = self.buffer.sample(batch_size)
            loss = F.mse_loss(self.model(obs), rew)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            meters.update(loss=loss)
            self.logger.log_losses(loss)


def evaluate(model, loader, logger):
    """Run once after training (no loop calls it): the logger's reads here are rare."""
    stats = {}
    for obs, rew in loader:
        loss = F.mse_loss(model(obs), rew)
        stats.update(loss=loss)
    logger.log_losses(stats["loss"])
