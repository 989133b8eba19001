"""Unpaired translation: the translator class is picked by --kind in translate/__init__.py."""
import argparse

import torch

from translate import build_translator
from data import make_loader

torch.set_float32_matmul_precision("high")
torch.backends.cudnn.benchmark = True

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", default="pix")
    parser.add_argument("--lr", type=float, default=2e-4)
    opt = parser.parse_args()
    loader = make_loader(opt)
    translator = build_translator(opt)
    for epoch in range(100):
        for batch in loader:
            translator.feed(batch)
            translator.train_step()
