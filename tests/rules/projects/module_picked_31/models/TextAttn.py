import torch
import torch.nn as nn


class Config:
    def __init__(self, dataset):
        self.train_path = f"{dataset}/train.txt"
        self.num_classes = 10
        self.n_vocab = 0
        self.embed = 300
        self.learning_rate = 5e-4
        self.num_epochs = 20
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embedding = nn.Embedding(config.n_vocab, config.embed)
        layer = nn.TransformerEncoderLayer(config.embed, 6, 1024, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(config.embed, config.num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.embedding(x)).mean(1))
