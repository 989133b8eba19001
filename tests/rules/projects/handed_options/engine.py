import torch
from torch.utils.data import DataLoader

from data.folder import ImageFolder


def run(config, model, optimizer):
    dataset = ImageFolder(config["dataroot"])
    loader = DataLoader(dataset, batch_size=config["batch_size"], shuffle=True,
                        num_workers=config["num_workers"], pin_memory=True, persistent_workers=True)
    for epoch in range(config["niter"]):
        for images in loader:
            images = images.cuda(non_blocking=True)
            loss = model(images).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
