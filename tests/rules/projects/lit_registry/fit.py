import argparse

import lightning as L
import torch

from lit import Reconstruction
from nets import *

parser = argparse.ArgumentParser()
parser.add_argument("--arch", default="plain", choices=sorted(autoencoders))
args = parser.parse_args()

net = autoencoders[args.arch](channels=3, width=96)
loader = torch.utils.data.DataLoader(torch.randn(512, 3, 64, 64), batch_size=32, num_workers=4,
                                     pin_memory=True, persistent_workers=True)
L.Trainer(accelerator="gpu", devices=1, max_epochs=20).fit(Reconstruction(net, 1e-3), loader)
