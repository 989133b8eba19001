import torch

import utils
from engine.trainer import Trainer


def main(model, loader, config):
    device = torch.device("cuda")
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    trainer = Trainer(config)
    queue = utils.Queue()
    queue.add(3000)
    stats = {}
    for epoch in range(config.epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = trainer.step(model, optimizer, x, y)
            utils.gradient_clipping(model, queue)
            utils.clip_and_log(model, stats)


if __name__ == "__main__":
    main(None, [], None)
