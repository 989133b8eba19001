from torch.utils.data import DataLoader


class EchoData:
    """Settings come from configs/train.yaml (pin_memory: true there)."""

    def __init__(self, cfg, train_set):
        self.cfg = cfg
        self.train_set = train_set

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.cfg.data.batch_size, shuffle=True,
                          num_workers=self.cfg.data.num_workers, pin_memory=self.cfg.data.pin_memory)
