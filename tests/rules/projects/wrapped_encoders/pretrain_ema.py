import torch

from nets.backbones import get_backbone
from nets.ema import ModelEma


def train(loader, epochs=90):
    model = get_backbone("resnet18").to("cuda")
    ema = ModelEma(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    for _ in range(epochs):
        for images, labels in loader:
            images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ema.update(model)


if __name__ == "__main__":
    train(loader=[])
