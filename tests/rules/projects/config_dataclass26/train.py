import torch

from tabkit import LoaderSettings
from tabkit.datamodule import TableData


def fit(table, epochs=5):
    data = TableData(table, LoaderSettings(batch_size=1024))
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.AdamW(net.parameters(), fused=True)
    torch.set_float32_matmul_precision("high")
    for _ in range(epochs):
        for batch in data.training_loader():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(net(batch["features"].cuda(non_blocking=True)),
                                                    batch["label"].cuda(non_blocking=True))
            loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    fit(None)
