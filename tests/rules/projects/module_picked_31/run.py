import argparse
from importlib import import_module

import torch

from train_eval import train
from data import build_dataset, build_iterator

parser = argparse.ArgumentParser(description="text classification")
parser.add_argument("--model", type=str, required=True, help="TextConv or TextAttn")
args = parser.parse_args()

if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    x = import_module("models." + args.model)
    config = x.Config("news")
    vocab, train_data, dev_data = build_dataset(config)
    train_iter = build_iterator(train_data, config)
    dev_iter = build_iterator(dev_data, config)
    config.n_vocab = len(vocab)
    model = x.Model(config).to(config.device)
    model.compile()
    train(config, model, train_iter, dev_iter)
