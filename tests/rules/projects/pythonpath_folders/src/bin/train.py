import argparse

import torch
from data import AudioDataLoader, AudioDataset
from model import Seq2Seq
from solver import Solver

parser = argparse.ArgumentParser()
parser.add_argument("--train_json", required=True)
parser.add_argument("--num_workers", type=int, default=4)
parser.add_argument("--epochs", type=int, default=30)


def main(args):
    tr_loader = AudioDataLoader(AudioDataset(args.train_json), batch_size=1, shuffle=True,
                                num_workers=args.num_workers, LFR_m=4, LFR_n=3)
    model = Seq2Seq(320, 512, 4233)
    model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-09)
    solver = Solver({"tr_loader": tr_loader}, model, optimizer, args.epochs)
    solver.train()


if __name__ == "__main__":
    main(parser.parse_args())
