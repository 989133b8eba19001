import torch
from torch.utils.data import DataLoader, TensorDataset

from utils_data import first_batches, infiniteloop


def main(total_steps=400_000):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = TensorDataset(torch.randn(50_000, 3, 32, 32), torch.zeros(50_000))
    loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=4, pin_memory=True, drop_last=True)
    preview = DataLoader(dataset, batch_size=16, num_workers=2, pin_memory=True)
    model = torch.nn.Conv2d(3, 3, 3, padding=1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4, fused=True)
    for x in first_batches(preview, 4):
        print(x.shape)
    looper = infiniteloop(loader)
    for step in range(total_steps):
        x1 = next(looper).to(device, non_blocking=True)
        loss = (model(x1) - x1).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
