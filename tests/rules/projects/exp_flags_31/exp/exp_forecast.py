import torch
import torch.nn as nn

from models import Seasonal, Vanilla


class ExpForecast:
    def __init__(self, args):
        self.args = args
        self.device = torch.device("cuda:0")
        self.model = self._build_model().to(self.device)

    def _build_model(self):
        model_dict = {"Seasonal": Seasonal, "Vanilla": Vanilla}
        return model_dict[self.args.model].Model(self.args).float()

    def train(self, loader):
        opt = torch.optim.Adam(self.model.parameters(), lr=self.args.learning_rate, fused=True)
        criterion = nn.MSELoss()
        if self.args.use_amp:
            scaler = torch.cuda.amp.GradScaler()
        for epoch in range(self.args.train_epochs):
            self.model.train()
            for x, y in loader:
                opt.zero_grad(set_to_none=True)
                x = x.float().to(self.device, non_blocking=True)
                y = y.float().to(self.device, non_blocking=True)
                if self.args.use_amp:
                    with torch.cuda.amp.autocast():
                        loss = criterion(self.model(x), y)
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss = criterion(self.model(x), y)
                    loss.backward()
                    opt.step()
