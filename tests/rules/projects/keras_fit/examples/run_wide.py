import numpy as np
import torch

from tabkit.models import WideNet

if __name__ == "__main__":
    x = np.load("features.npy")
    y = np.load("targets.npy")
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    model = WideNet(x.shape[1], hidden=(512, 256), device=device)
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=1024, epochs=20)
