import torch.nn as nn


class ContrastiveModel(nn.Module):
    def __init__(self, encoder, projection_dim, n_features):
        super().__init__()
        self.encoder = encoder
        self.encoder.fc = nn.Identity()
        self.projector = nn.Sequential(nn.Linear(n_features, n_features), nn.ReLU(),
                                       nn.Linear(n_features, projection_dim))

    def forward(self, x_i, x_j):
        return self.projector(self.encoder(x_i)), self.projector(self.encoder(x_j))
