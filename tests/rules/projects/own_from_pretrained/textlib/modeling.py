import torch
import torch.nn as nn


class PreTrainedEncoder(nn.Module):
    """Loads the weights of a named checkpoint into a freshly built model (pre-transformers code)."""

    @classmethod
    def from_pretrained(cls, name, cache_dir=None, **kwargs):
        model = cls(**kwargs)
        state = torch.load(f"{cache_dir or '.'}/{name}.bin", map_location="cpu")
        model.load_state_dict(state, strict=False)
        return model


class Encoder(nn.Module):
    def __init__(self, width=768, layers=12):
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(width, 12) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MaskedLMModel(PreTrainedEncoder):
    def __init__(self, vocab=30522, width=768):
        super().__init__()
        self.encoder = Encoder(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        return self.head(self.encoder(x))
