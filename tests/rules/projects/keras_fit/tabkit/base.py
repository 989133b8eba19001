import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TabularModel(nn.Module):
    """Keras-style: compile() picks the optimizer and the loss, fit() runs the loop over itself."""

    def __init__(self, device="cpu"):
        super().__init__()
        self.device = device

    def compile(self, optimizer, loss):
        self.optim = torch.optim.Adam(self.parameters()) if optimizer == "adam" else \
            torch.optim.SGD(self.parameters(), lr=0.01)
        self.loss_fn = nn.functional.mse_loss if loss == "mse" else nn.functional.binary_cross_entropy

    def fit(self, x, y, batch_size=256, epochs=1):
        loader = DataLoader(TensorDataset(torch.as_tensor(x), torch.as_tensor(y)), batch_size=batch_size,
                            shuffle=True)
        model = self.train()
        for epoch in range(epochs):
            for xb, yb in loader:
                xb, yb = xb.to(self.device).float(), yb.to(self.device).float()
                pred = model(xb)
                self.optim.zero_grad()
                loss = self.loss_fn(pred, yb)
                loss.backward()
                self.optim.step()
        return self
