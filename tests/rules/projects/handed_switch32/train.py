import torch
from torch.utils.data import DataLoader

from engine.loop import run_epoch
from engine.stepper import Stepper
from segnet import Segmenter

if __name__ == "__main__":
    classes = 21
    epochs = 50
    use_bf16 = False

    model = Segmenter(classes).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(torch.load("voc.pt"), batch_size=16, shuffle=True, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    stepper = Stepper(model, opt)
    for epoch in range(epochs):
        run_epoch(model, stepper, loader, use_bf16)
