from torch import nn


class Vocoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Sequential(nn.ConvTranspose1d(80, 64, 16, stride=8), nn.GELU(),
                                nn.ConvTranspose1d(64, 1, 64, stride=32))

    def forward(self, mels):
        return self.up(mels.transpose(1, 2)).squeeze(1)
