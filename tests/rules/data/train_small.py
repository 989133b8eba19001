"""A tiny CNN trained on random data: a target for GP301-GP305."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc(x.mean((2, 3)))


def train(model, batches, optimizer, device):
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
    loss = train(model, batches, optimizer, device)
    print("final", float(loss.detach()), ",".join(model.state_dict()))


if __name__ == "__main__":
    main()
