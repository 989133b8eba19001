import torch

from data import make_loaders


def run_epoch(net, loader, optimizer, device):
    for images, targets in loader:
        images = images.to(device)
        loss = torch.nn.functional.mse_loss(net(images), targets.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def pretrain(net, train_set, val_set, epochs):
    device = torch.device("cuda")
    train_loader, val_loader = make_loaders(train_set, val_set, device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    for _ in range(epochs):
        run_epoch(net, train_loader, optimizer, device)


if __name__ == "__main__":
    pretrain(None, None, None, 10)
