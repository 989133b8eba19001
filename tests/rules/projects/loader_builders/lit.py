import lightning as L

from data.loading import make_loader


class ShardData(L.LightningDataModule):
    def __init__(self, train_set, test_set, workers: int = 8):
        super().__init__()
        self.train_set, self.test_set, self.workers = train_set, test_set, workers

    def train_dataloader(self):
        return make_loader(self.train_set, batch_size=128, workers=self.workers)

    def val_dataloader(self):
        return make_loader(self.test_set, workers=self.workers, sampler=LengthBuckets(self.test_set, 64))

    def test_dataloader(self):
        return make_loader(self.test_set, workers=self.workers)


if __name__ == "__main__":
    L.Trainer(max_epochs=100, accelerator="gpu").fit(Net(), datamodule=ShardData(*splits()))
