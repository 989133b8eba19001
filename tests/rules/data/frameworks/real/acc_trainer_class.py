# Held-out shape of lucidrains/denoising-diffusion-pytorch's Trainer class (MIT): condensed and
# rewritten here, not the original text. The Accelerator is built in a class __init__
# (self.accelerator), the loader is prepared and cycled, accumulation is written by hand, and the
# class is called Trainer although it is not a framework's.
from multiprocessing import cpu_count

import torch
from accelerate import Accelerator
from torch.optim import Adam
from torch.utils.data import DataLoader, Dataset


def cycle(dl):
    while True:
        for data in dl:
            yield data


class Images(Dataset):
    def __init__(self, n: int = 64) -> None:
        self.x = torch.randn(n, 3, 32, 32)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Trainer:
    def __init__(self, diffusion_model, *, train_batch_size=16, gradient_accumulate_every=1, train_lr=1e-4,
                 train_num_steps=100000, adam_betas=(0.9, 0.99), amp=False, mixed_precision_type="fp16",
                 split_batches=True):
        self.accelerator = Accelerator(split_batches=split_batches, mixed_precision=mixed_precision_type if amp else "no")
        self.model = diffusion_model
        self.batch_size = train_batch_size
        self.gradient_accumulate_every = gradient_accumulate_every
        self.train_num_steps = train_num_steps
        self.ds = Images()
        dl = DataLoader(self.ds, batch_size=train_batch_size, shuffle=True, pin_memory=True, num_workers=cpu_count())
        dl = self.accelerator.prepare(dl)
        self.dl = cycle(dl)
        self.opt = Adam(diffusion_model.parameters(), lr=train_lr, betas=adam_betas)
        self.model, self.opt = self.accelerator.prepare(self.model, self.opt)
        self.step = 0

    def train(self):
        accelerator = self.accelerator
        device = accelerator.device
        while self.step < self.train_num_steps:
            self.model.train()
            total_loss = 0.0
            for _ in range(self.gradient_accumulate_every):
                data = next(self.dl).to(device)
                with self.accelerator.autocast():
                    loss = self.model(data)
                    loss = loss / self.gradient_accumulate_every
                    total_loss += loss.item()
                self.accelerator.backward(loss)
            accelerator.clip_grad_norm_(self.model.parameters(), 1.0)
            accelerator.wait_for_everyone()
            self.opt.step()
            self.opt.zero_grad()
            self.step += 1


if __name__ == "__main__":
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 3, 3, padding=1))

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x):
            return torch.nn.functional.mse_loss(self.net(x), x)

    Trainer(Wrap(), train_num_steps=10).train()
