import torch
from torch.utils.data import DataLoader

import validate
from detector import Detector


def train(dataset, val_set, epochs=12):
    net = Detector().cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=4, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(epochs):
        for images, targets in loader:
            loss = (net(images.cuda(non_blocking=True)) - targets.cuda(non_blocking=True)).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        print(epoch, validate.validate(net, val_set))


if __name__ == "__main__":
    train(load_train(), load_val())
