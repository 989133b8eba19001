import importlib

import torch
import torch.nn.functional as F

from config import model_name

Model = getattr(importlib.import_module(f"model.{model_name}"), model_name)
config = getattr(importlib.import_module("config"), f"{model_name}Config")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(batches):
    model = Model(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, fused=True)
    for clicked, candidates, target in batches:
        clicked, candidates = clicked.to(device, non_blocking=True), candidates.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(clicked, candidates), target.to(device, non_blocking=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    train([])
