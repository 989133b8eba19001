from .base import BaseRunner


class SegRunner(BaseRunner):
    def __init__(self, cfg, net, loss_fn, loader, decode=None):
        super().__init__(cfg, net, loss_fn)
        self.loader = loader
        self.decode = decode

    def one_epoch(self, epoch):
        self.net.train()
        for images, masks in self.loader:
            images = images.to(self.device, non_blocking=True)
            masks = masks.to(self.device, non_blocking=True)
            loss = self.loss_fn(self.net(images), masks)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        if self.decode is not None:
            self.decode(images, masks)
