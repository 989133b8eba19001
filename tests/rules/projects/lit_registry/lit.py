import lightning as L
import torch


class Reconstruction(L.LightningModule):
    def __init__(self, net, lr):
        super().__init__()
        self.net, self.lr = net, lr

    def training_step(self, batch, batch_idx):
        return torch.nn.functional.mse_loss(self.net(batch), batch)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr, fused=True)
