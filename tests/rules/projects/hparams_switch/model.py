from torch import nn


class MelDecoder(nn.Module):
    def __init__(self, hparams):
        super().__init__()
        self.rnn = nn.LSTM(hparams.n_mel_channels, 256, batch_first=True)
        self.proj = nn.Linear(256, hparams.n_mel_channels)

    def forward(self, mels):
        out, _ = self.rnn(mels)
        return self.proj(out)
