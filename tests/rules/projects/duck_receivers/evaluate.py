"""An evaluation script: its loop is no training run's."""
import torch

from data import create_dataset
from models import create_model

if __name__ == "__main__":
    model = create_model("gan")
    model.eval()
    with torch.no_grad():
        for data in create_dataset(batch_size=64):
            print(model.score_batch(data))
