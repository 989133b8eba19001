import torch
import torch.nn as nn

from nets import Detector


class Exp:
    """The experiment: what to build and how, read by the training script."""

    def __init__(self):
        self.depth, self.width, self.num_classes = 0.33, 0.5, 80
        self.basic_lr_per_img = 0.01 / 64.0
        self.momentum, self.weight_decay = 0.9, 5e-4
        self.max_epoch = 300

    def get_model(self):
        if getattr(self, "model", None) is None:
            self.model = Detector(self.depth, self.width, self.num_classes)
        return self.model

    def get_optimizer(self, model, batch_size):
        pg0, pg1 = [], []
        for name, param in model.named_parameters():
            (pg0 if param.ndim <= 1 else pg1).append(param)
        lr = self.basic_lr_per_img * batch_size
        optimizer = torch.optim.SGD(pg0, lr=lr, momentum=self.momentum, nesterov=True)
        optimizer.add_param_group({"params": pg1, "weight_decay": self.weight_decay})
        return optimizer

    def get_loss(self):
        return nn.MSELoss()
