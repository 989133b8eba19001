import torch

from exps.base import Exp


def main():
    exp = Exp()
    device = torch.device("cuda")
    model = exp.get_model()
    model.to(device)
    optimizer = exp.get_optimizer(model, 64)
    criterion = exp.get_loss()
    loader = torch.load("batches.pt")
    for epoch in range(exp.max_epoch):
        for images, targets in loader:
            images = images.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = criterion(model(images), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
