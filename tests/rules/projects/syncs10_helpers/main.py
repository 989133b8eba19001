import torch
from torch import nn

from engine import evaluate, train_one_epoch
from tools import TensorboardLogger


def main():
    device = torch.device("cuda")
    model = nn.Linear(16, 4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,))),
                                         batch_size=8, num_workers=2, pin_memory=True, persistent_workers=True)
    log_writer = TensorboardLogger(None)
    for epoch in range(10):
        train_one_epoch(model, loader, optimizer, device, log_writer=log_writer)
        evaluate(model, loader, device)


if __name__ == "__main__":
    main()
