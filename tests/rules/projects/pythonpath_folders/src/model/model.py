from torch import nn


class Seq2Seq(nn.Module):
    def __init__(self, d_input, d_model, vocab):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, 8, batch_first=True), 6)
        self.proj = nn.Linear(d_input, d_model)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, feats, tokens):
        logits = self.out(self.encoder(self.proj(feats)))
        return nn.functional.cross_entropy(logits.transpose(1, 2), tokens)
