import torch


def fit(model, opt, loader, criterion_fn, epochs=10):
    for _ in range(epochs):
        for (x,) in loader:
            x = x.cuda(non_blocking=True)
            out = model(x)
            loss, stats = criterion_fn(out, x[:, :4])
            opt.zero_grad()
            loss.backward()
            opt.step()
