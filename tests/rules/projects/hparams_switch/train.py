import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from hparams import create_hparams
from model import MelDecoder


def train(hparams):
    model = MelDecoder(hparams).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=hparams.learning_rate, fused=True)
    if hparams.fp16_run:
        from apex import amp
        model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
    mels = TensorDataset(torch.randn(256, 100, hparams.n_mel_channels))
    loader = DataLoader(mels, batch_size=hparams.batch_size, shuffle=True, num_workers=2, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(hparams.epochs):
        for (batch,) in loader:
            batch = batch.cuda(non_blocking=True)
            loss = torch.nn.functional.mse_loss(model(batch[:, :-1]), batch[:, 1:])
            optimizer.zero_grad(set_to_none=True)
            if hparams.fp16_run:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--hparams", type=str, default="")
    args = parser.parse_args()
    train(create_hparams(args.hparams))
