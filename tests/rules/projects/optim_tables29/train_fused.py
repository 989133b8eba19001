import sys

import torch

from nets import SegNet
from optim import optimizer_class

device = torch.device("cuda")
net = SegNet().to(device)
settings = {"optimizer": {"name": sys.argv[1]}}
optimizer = optimizer_class(settings)(net.parameters(), lr=1e-3, fused=True)
for image, mask in loader:
    loss = torch.nn.functional.cross_entropy(net(image.to(device)), mask.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
