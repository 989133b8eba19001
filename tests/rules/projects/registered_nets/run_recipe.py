import torch
from torch.utils.data import DataLoader, TensorDataset

from runtime.recipe import Recipe
from runtime.runner import Runner

if __name__ == "__main__":
    torch.backends.cudnn.benchmark = True
    torch.set_float32_matmul_precision("high")
    data = TensorDataset(torch.randn(256, 3, 64, 64), torch.randn(256, 3, 64, 64))
    loader = DataLoader(data, batch_size=16, num_workers=2, pin_memory=True, persistent_workers=True)
    Runner(Recipe(), loader, torch.device("cuda")).fit(5)
