import torch

from engine import Engine

torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")


def main():
    device = torch.device("cuda")
    engine = Engine(2, 32, 12, 1e-3, device)
    data = torch.utils.data.TensorDataset(torch.randn(1024, 2, 207, 13), torch.randn(1024, 12))
    loader = torch.utils.data.DataLoader(data, batch_size=64, shuffle=True, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    for epoch in range(100):
        for x, y in loader:
            engine.train(x.to(device, non_blocking=True), y.to(device, non_blocking=True))


if __name__ == "__main__":
    main()
