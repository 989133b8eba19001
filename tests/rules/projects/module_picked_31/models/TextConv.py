import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, dataset):
        self.train_path = f"{dataset}/train.txt"
        self.num_classes = 10
        self.n_vocab = 0
        self.embed = 300
        self.num_filters = 256
        self.learning_rate = 1e-3
        self.num_epochs = 20
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embedding = nn.Embedding(config.n_vocab, config.embed)
        self.convs = nn.ModuleList(nn.Conv2d(1, config.num_filters, (k, config.embed)) for k in (2, 3, 4))
        self.fc = nn.Linear(config.num_filters * 3, config.num_classes)

    def forward(self, x):
        out = self.embedding(x).unsqueeze(1)
        out = torch.cat([F.max_pool1d(F.relu(conv(out)).squeeze(3), out.size(2) - conv.kernel_size[0] + 1).squeeze(2)
                         for conv in self.convs], 1)
        return self.fc(out)
