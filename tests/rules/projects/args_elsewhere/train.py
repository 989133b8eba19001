import torch

from data.loader import construct_loaders
from utils.parsing import parse_train_args


def main(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = torch.load(args.data_dir + "complexes.pt")
    train_loader, val_loader = construct_loaders(args, data["train"], data["val"])
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.SiLU(), torch.nn.Linear(256, 3)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=device.type == "cuda")
    for epoch in range(args.epochs):
        for x, y in train_loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main(parse_train_args())
