import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo import denoisers  # noqa: F401  (registers the denoisers)
from zoo import catalog


def main():
    cfg = {"arch": "gated", "width": 64, "device": torch.device("cuda")}
    noisy = torch.randn(512, 3, 96, 96)
    loader = DataLoader(TensorDataset(noisy, noisy.clone()), batch_size=32, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    net = catalog.make_net(cfg)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=True)
    for epoch in range(20):
        for x, y in loader:
            x = x.to(cfg["device"], non_blocking=True)
            y = y.to(cfg["device"], non_blocking=True)
            loss = torch.nn.functional.mse_loss(net(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
