import torch

from textlib.modeling import MaskedLMModel


class Pretrainer:
    def __init__(self, lr=1e-4):
        self.model = MaskedLMModel.from_pretrained("base-uncased", vocab=30522).cuda()
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=lr, fused=True)

    def train(self, loader, epochs=1):
        for _ in range(epochs):
            for tokens, labels in loader:
                logits = self.model(tokens.cuda(non_blocking=True))
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.cuda(non_blocking=True).flatten())
                self.optim.zero_grad(set_to_none=True)
                loss.backward()
                self.optim.step()


if __name__ == "__main__":
    Pretrainer().train(make_loader())
