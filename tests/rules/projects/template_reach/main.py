import torch

from engines import ImageSoftmaxEngine, ImageTripletEngine
from trainers.speech import Trainer


def main(datamanager, kind="softmax"):
    model = torch.nn.Linear(16, 4).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)
    criterion = torch.nn.CrossEntropyLoss()
    if kind == "softmax":
        engine = ImageSoftmaxEngine(datamanager, model, optimizer, criterion)
    else:
        engine = ImageTripletEngine(datamanager, model, optimizer, criterion)
    engine.run(max_epoch=60)


def speech(rank, config, train_loader, valid_loader):
    model = torch.nn.Linear(16, 16).to(rank)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    trainer = Trainer(rank, config, False, model, torch.nn.MSELoss(), optimizer, train_loader, valid_loader)
    trainer.train()


if __name__ == "__main__":
    main(None)
