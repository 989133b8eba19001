import numpy as np
import torch

from tabkit.models import *


def main():
    x, y = np.load("fields.npy"), np.load("labels.npy")
    net = FieldConv(x.shape[1], device="cuda" if torch.cuda.is_available() else "cpu")
    net.compile("sgd", "bce")
    net.fit(x, y, epochs=5)


if __name__ == "__main__":
    main()
