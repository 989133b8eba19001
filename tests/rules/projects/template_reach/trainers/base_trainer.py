"""An audio trainer: the base class runs the epochs; validation (a subclass's hook) runs on rank 0
only every ``validation_interval`` epochs, or on every epoch when the user asks for validation
alone."""


class BaseTrainer:
    def __init__(self, rank, config, only_validation, model, optimizer):
        self.rank = rank
        self.model = model
        self.optimizer = optimizer
        self.epochs = config["epochs"]
        self.validation_interval = config["validation_interval"]
        self.only_validation = only_validation

    def train(self):
        for epoch in range(1, self.epochs + 1):
            if self.only_validation and self.rank == 0:
                self.model.eval()
                self._validation_epoch(epoch)
                continue
            self.model.train()
            self._train_epoch(epoch)
            if self.rank == 0 and (epoch % self.validation_interval == 0):
                self.model.eval()
                score = self._validation_epoch(epoch)
                print(epoch, score)

    def _train_epoch(self, epoch):
        raise NotImplementedError

    def _validation_epoch(self, epoch):
        raise NotImplementedError
