import torch.nn as nn


class Model(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embed = nn.Linear(args.channels, args.d_model)
        layer = nn.TransformerEncoderLayer(args.d_model, args.heads, 4 * args.d_model, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, args.layers)
        self.proj = nn.Linear(args.d_model, args.channels)
        self.horizon = args.pred_len

    def forward(self, x):
        return self.proj(self.encoder(self.embed(x)))[:, -self.horizon:]
