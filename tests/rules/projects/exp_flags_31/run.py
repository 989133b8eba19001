import argparse

import torch
from torch.utils.data import DataLoader

from exp.exp_forecast import ExpForecast
from data import WindowDataset

parser = argparse.ArgumentParser(description="long-horizon forecasting")
parser.add_argument("--model", type=str, default="Seasonal")
parser.add_argument("--channels", type=int, default=7)
parser.add_argument("--d_model", type=int, default=512)
parser.add_argument("--heads", type=int, default=8)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--kernel", type=int, default=25)
parser.add_argument("--pred_len", type=int, default=96)
parser.add_argument("--learning_rate", type=float, default=1e-4)
parser.add_argument("--train_epochs", type=int, default=10)
parser.add_argument("--use_amp", action="store_true", help="use automatic mixed precision", default=False)


def main():
    args = parser.parse_args()
    loader = DataLoader(WindowDataset(args.pred_len), batch_size=32, shuffle=True, num_workers=8, pin_memory=True,
                        persistent_workers=True)
    exp = ExpForecast(args)
    exp.train(loader)


if __name__ == "__main__":
    main()
