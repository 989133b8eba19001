import torch

from agents.logger import TrainLogger
from agents.trainer import Trainer
from utils.buffers import ReplayBuffer
from torch.utils.tensorboard import SummaryWriter


def main():
    device = torch.device("cuda")
    model = torch.nn.Linear(8, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    buffer = ReplayBuffer(100000, 8, device)
    trainer = Trainer(model, optimizer, buffer, TrainLogger(SummaryWriter()))
    trainer.train(10000, 256)


if __name__ == "__main__":
    main()
