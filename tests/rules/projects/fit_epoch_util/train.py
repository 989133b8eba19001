"""The entry builds the model and the optimizer and runs one epoch after another through a helper."""
import torch
from torch import nn

from nets.training import DetectorTrainer
from utils.utils_fit import fit_one_epoch

if __name__ == "__main__":
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(4)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    train_util = DetectorTrainer(model, optimizer)
    gen = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 3, 32, 32), torch.randn(64, 4)),
                                      batch_size=8, num_workers=2, pin_memory=True, persistent_workers=True)
    for epoch in range(50):
        fit_one_epoch(model, train_util, optimizer, epoch, gen, True)
