import torch

from engine import train_one_epoch

if __name__ == "__main__":
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    data = torch.utils.data.TensorDataset(torch.randn(256, 16), torch.randn(256, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, num_workers=2, pin_memory=True,
                                         persistent_workers=True)
    for epoch in range(10):
        train_one_epoch(model, loader, optimizer, device, epoch)
