import torch
from torch.utils.data import DataLoader

from restorers import build_model


def train(opt, net, dataset, device):
    loader = DataLoader(dataset, batch_size=opt["batch_size"], shuffle=True, num_workers=4, pin_memory=True)
    model = build_model(opt, net, device)
    for epoch in range(opt["epochs"]):
        for train_data in loader:
            model.feed_data(train_data)
            model.optimize_parameters()


if __name__ == "__main__":
    train({"batch_size": 16, "epochs": 100}, None, None, torch.device("cuda"))
