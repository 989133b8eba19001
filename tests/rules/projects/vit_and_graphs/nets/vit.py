import torch.nn as nn

from nets.embed import PatchEmbedding


class Encoder(nn.Module):
    def __init__(self, width=192, depth=12, classes=1000):
        super().__init__()
        self.embed = PatchEmbedding(16, 3, width)
        self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 3, batch_first=True), depth)
        self.fc = nn.Linear(width, classes)

    def forward(self, images):
        return self.fc(self.layers(self.embed(images))[:, 0])
