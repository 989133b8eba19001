# The model class comes from the configuration by name; each step calls its `loss`.
import json

import torch

import models


def main(config_path, loader):
    cfg = json.load(open(config_path))
    model_class = getattr(models, cfg["model"]["class"])
    model = model_class(cfg["dim"], cfg["vocab"]).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
    for batch in loader:
        loss = model.loss(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
