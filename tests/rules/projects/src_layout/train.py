"""Entry script of a src/ layout package (installed with pip install -e .)."""
import torch

from trainpkg.data import make_loader
from trainpkg.models import create_model
from trainpkg.loop import fit


def main():
    model = create_model("mlp").cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    fit(model, make_loader(), optimizer, epochs=5)


if __name__ == "__main__":
    main()
