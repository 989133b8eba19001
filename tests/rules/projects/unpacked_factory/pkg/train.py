import torch

from pkg.evaluate import evaluate, setup_model


def train(opt, loader):
    model, criterion, optimizer, scheduler = setup_model(opt)
    for epoch in range(opt.epochs):
        for x, y in loader:
            loss = criterion(model(x.to(opt.device)), y.to(opt.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        evaluate(model, loader, opt.device)


if __name__ == "__main__":
    train(parse_opts(), make_loader())
