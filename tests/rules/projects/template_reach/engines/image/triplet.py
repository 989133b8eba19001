import torch

from engines.engine import Engine


class ImageTripletEngine(Engine):
    """The step's backward and update are the base class's (``model_backward_and_update``)."""

    def __init__(self, datamanager, model, optimizer, criterion):
        super().__init__(datamanager)
        self.device = torch.device("cuda")
        self.model = model.to(self.device)
        self.optimizer = optimizer
        self.criterion = criterion

    def parse_batch_train(self, batch):
        x = batch["img"].to(self.device)
        y = batch["label"].to(self.device)
        return x, y

    def forward_backward(self, batch):
        x, y = self.parse_batch_train(batch)
        loss = self.criterion(self.model(x), y)
        self.model_backward_and_update(loss)
        return {"loss": float(loss)}
