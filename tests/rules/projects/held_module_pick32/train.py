import importlib

import torch

from hparams import hp


def main():
    arch_module = importlib.import_module(f"archs.{hp.arch}.net")
    model = getattr(arch_module, "Forecaster")(hp).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=hp.lr)
    for epoch in range(hp.epochs):
        for x, y in torch.load(hp.data):
            loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
