import simple_parsing
import torch
import torch.nn.functional as F

from data.loading import eval_loader, make_loader, serial_loader
from options import RunArgs
from torch.utils.data import DataLoader


def main():
    args = simple_parsing.parse(RunArgs)
    device = torch.device("cuda")
    model = torch.nn.Linear(128, 10).to(device)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    train_set, val_set, test_set = load_splits(args.data)
    train = make_loader(train_set, workers=args.workers)
    val = eval_loader(val_set, 256)
    test = make_loader(test_set, workers=args.workers, persistent_workers=False)
    aux = DataLoader(train_set, batch_size=64, num_workers=args.workers, pin_memory=True,
                     persistent_workers=args.keep_workers)
    single = serial_loader(train_set)
    for epoch in range(args.epochs):
        for x, y in train:
            loss = F.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for x, y in val:
            model(x.to(device, non_blocking=True))
        for x, y in aux:
            model(x.to(device, non_blocking=True))
        for x, y in single:
            model(x.to(device, non_blocking=True))
    for x, y in make_loader(test_set, workers=args.workers):
        model(x.to(device, non_blocking=True))


if __name__ == "__main__":
    main()
