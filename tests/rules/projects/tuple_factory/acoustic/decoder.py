import torch.nn as nn

from utils.audio import pad_frames


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 256)
        self.post = nn.Conv1d(1, 1, 5, padding=2)
        self.out = nn.Linear(256, dim)

    def forward(self, x):
        h = self.out(self.proj(x).relu())
        return pad_frames(self.post(h.unsqueeze(1)).squeeze(1), h.size(-1))
