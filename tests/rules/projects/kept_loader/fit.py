import torch
from torch import nn

from data.streams import RepeatingLoader, Tiles, make_loader


def main():
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    train = make_loader(50_000, 256)
    held = RepeatingLoader(Tiles(5_000), batch_size=512, num_workers=4, pin_memory=True)
    for epoch in range(30):
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            loss.backward()
            opt.step()
            opt.zero_grad()
        with torch.no_grad():
            for x, y in held:
                model(x.cuda(non_blocking=True))


if __name__ == "__main__":
    main()
