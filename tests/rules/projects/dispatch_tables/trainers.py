import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def trainer_synapse(args, model, snapshot_path):
    loader = DataLoader(args.train_set, batch_size=args.batch_size, shuffle=True, num_workers=8, pin_memory=True,
                        persistent_workers=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(args.max_epochs):
        for image, label in loader:
            image, label = image.cuda(non_blocking=True), label.cuda(non_blocking=True)
            loss = criterion(model(image), label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save(model.state_dict(), f"{snapshot_path}/epoch_{epoch}.pth")


def trainer_acdc(args, model, snapshot_path):
    return trainer_synapse(args, model, snapshot_path)
