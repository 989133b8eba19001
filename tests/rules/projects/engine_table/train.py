"""The engine class is picked by the task from a table of engines; the optimizer takes the
model's own parameter groups (backbone and decoder at different learning rates)."""
import argparse

import torch

from engines.registry import ENGINES
from nets.segmenter import Segmenter


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="segmentation")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    data = torch.utils.data.TensorDataset(torch.randn(64, 3, 128, 128), torch.randint(0, 21, (64, 128, 128)))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    model = Segmenter(num_classes=21).cuda()
    groups = [{"params": model.backbone_parameters(), "lr": args.lr},
              {"params": model.decoder_parameters(), "lr": args.lr * 10}]
    optimizer = torch.optim.SGD(groups, momentum=0.9, nesterov=True)
    Engine = ENGINES[args.task]
    engine = Engine(args, model, optimizer)
    for epoch in range(args.epochs):
        engine.run_epoch(loader, epoch)


if __name__ == "__main__":
    main()
