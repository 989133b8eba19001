import torch
from torch import nn


class TokenMixer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.proj = nn.Linear(cfg.seq_len, cfg.pred_len)

    def forward(self, x):
        return self.proj(x.transpose(1, 2)).transpose(1, 2)


class AttentionForecaster(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(cfg.d_model, 4, batch_first=True), 2)
        self.head = nn.Linear(cfg.d_model, cfg.channels)

    def forward(self, x):
        return self.head(self.encoder(x))
