import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.rnn = nn.GRU(hp.d, hp.h, batch_first=True)
        self.out = nn.Linear(hp.h, 1)

    def forward(self, x):
        return self.out(self.rnn(x)[0][:, -1])
