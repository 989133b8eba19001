import torch.nn.functional as F

from .optim_utils import clear_grads


def fit(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            clear_grads(optimizer)
