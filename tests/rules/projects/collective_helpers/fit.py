import torch
import torch.nn.functional as F

from comm import gather_counts, reduce_scalar


def fit(model, optimizer, loader, device, epochs):
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            lr = reduce_scalar(optimizer.param_groups[0]["lr"], device)
            slots = gather_counts([1, 2], device)


if __name__ == "__main__":
    net = torch.nn.Linear(8, 2).cuda()
    fit(net, torch.optim.SGD(net.parameters(), lr=0.1, fused=True), make_loader(), torch.device("cuda"), 3)
