import torch
import torch.nn as nn
import yaml
from torch.utils.data import DataLoader

from modeling import build_model
from trainer import Trainer


def split_param_groups(model):
    pg0, pg1, pg2 = [], [], []  # batch-norm weights, other weights, biases
    for module in model.modules():
        if hasattr(module, "bias") and isinstance(module.bias, nn.Parameter):
            pg2.append(module.bias)
        if isinstance(module, nn.BatchNorm2d):
            pg0.append(module.weight)
        elif hasattr(module, "weight") and isinstance(module.weight, nn.Parameter):
            pg1.append(module.weight)
    return pg0, pg1, pg2


def main(cfg_path):
    with open(cfg_path) as f:
        cfg = yaml.safe_load(f)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(cfg["model"])
    pg0, pg1, pg2 = split_param_groups(model)
    optimizer = torch.optim.SGD(pg0, lr=cfg["lr"], momentum=0.937, nesterov=True)
    optimizer.add_param_group({"params": pg1, "weight_decay": cfg["weight_decay"]})
    optimizer.add_param_group({"params": pg2})
    dataset = torch.load(cfg["data"])
    loader = DataLoader(dataset, batch_size=cfg["batch_size"], shuffle=True, num_workers=8, pin_memory=True,
                        persistent_workers=True)
    Trainer(model, optimizer, loader, device).fit(cfg["epochs"])


if __name__ == "__main__":
    main("config.yaml")
