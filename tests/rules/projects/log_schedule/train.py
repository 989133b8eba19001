import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Trainer

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log_freq", type=int, default=10)
    parser.add_argument("--eval_freq", type=int, default=500)
    cfg = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    data = TensorDataset(torch.randint(0, 100, (64, 16)), torch.randint(0, 100, (64, 16)))
    loader = DataLoader(data, batch_size=8, num_workers=2, pin_memory=True, persistent_workers=True)
    model = torch.nn.Transformer(d_model=64, nhead=4).cuda()
    model.compile()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    Trainer(model, optimizer, loader, cfg).fit()
