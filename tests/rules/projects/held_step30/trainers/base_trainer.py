from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class BaseTrainer:
    """Runs the epochs; the subclass builds the model, which owns its step."""

    def __init__(self, data_dir, epochs):
        self.data_dir = data_dir
        self.epochs = epochs
        self.model = None
        self.build_model()

    def build_model(self):
        raise NotImplementedError

    def make_loader(self):
        dataset = datasets.ImageFolder(self.data_dir, transforms.ToTensor())
        return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True,
                          persistent_workers=True)

    def train(self):
        loader = self.make_loader()
        for epoch in range(self.epochs):
            self.run_epoch(loader, epoch)
            self.model.save(f"ckpt_{epoch}.pt")

    def run_epoch(self, loader, epoch):
        for i, (images, _) in enumerate(loader):
            stats = self.model.train_on_batch(images)
            self.model.refresh_stats(images)
            if i % 100 == 0:
                print(epoch, i, stats)
