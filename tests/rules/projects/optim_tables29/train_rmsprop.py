import sys

import torch

from nets import SegNet
from quiet.optimizers import get_slow

device = torch.device("cuda")
net = SegNet().to(device)
optimizer = get_slow(sys.argv[1])(net.parameters(), lr=1e-3)
for image, mask in loader:
    loss = torch.nn.functional.cross_entropy(net(image.to(device)), mask.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
