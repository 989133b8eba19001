"""Pre-training: the loss function, closed over a writer, logs its parts every step."""
import torch
from torch import nn

import trainer


def main(model, data_iter, writer):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    runner = trainer.Trainer(model, data_iter, optimizer, torch.device("cuda"))

    def get_loss(model, batch, global_step):
        input_ids, labels = batch
        loss = criterion(model(input_ids), labels)
        writer.add_scalar("loss", loss.item(), global_step)
        return loss

    runner.train(get_loss, 10)
