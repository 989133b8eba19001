"""The batch source and the loss are this script's functions; the loop that calls them is the
runner's (step_runner.py)."""
import numpy as np
import torch

from nets import Classifier
from step_runner import StepRunner

DEVICE = torch.device("cuda")
FEATURES = np.load("features.npy")
LABELS = np.load("labels.npy")


def sample_batch(size=256):
    rows = np.random.randint(0, len(FEATURES), size=size)
    inputs = torch.from_numpy(FEATURES[rows]).to(DEVICE)
    targets = torch.from_numpy(LABELS[rows]).to(DEVICE)
    return inputs, targets


def weighted_error(pred, target):
    weights = torch.tensor([0.5, 2.0]).repeat(pred.shape[1] // 2).to(pred.device)
    return ((pred - target).abs() * weights).mean()


def final_report(model):
    print(sum(p.norm().item() for p in model.parameters()))


if __name__ == "__main__":
    model = Classifier(dim=512, classes=512).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    StepRunner(model, optimizer, fetch=sample_batch, loss_fn=weighted_error,
               on_end=final_report).run(10000)
