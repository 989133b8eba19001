import sys

import torch
import yaml

from nets import SegNet
from optim import optimizer_class

with open(sys.argv[1]) as fh:
    settings = yaml.safe_load(fh)
device = torch.device("cuda")
net = SegNet().to(device)
opt_cls = optimizer_class(settings)
opt_kwargs = {key: value for key, value in settings["train"]["optim"].items() if key != "name"}
optimizer = opt_cls(net.parameters(), **opt_kwargs)
for image, mask in loader:
    loss = torch.nn.functional.cross_entropy(net(image.to(device)), mask.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
