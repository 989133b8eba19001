import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from optimizers import get_optimizer
from options import Options


def main(config):
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model=128, nhead=8, batch_first=True), 3).cuda()
    data = TensorDataset(torch.load("series.pt"), torch.load("targets.pt"))
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=config["num_workers"], pin_memory=True,
                        persistent_workers=True)
    optim_class = get_optimizer(config["optimizer"])
    optimizer = optim_class(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = nn.functional.mse_loss(model(x).mean(-1), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    args = Options().parse()
    main(vars(args))
