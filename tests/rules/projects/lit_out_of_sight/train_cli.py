"""The Trainer's settings come from the command line (from_argparse_args)."""
from argparse import ArgumentParser

from pytorch_lightning import Trainer

from tasks.segment import SegmentTask

if __name__ == "__main__":
    parser = ArgumentParser()
    parser = Trainer.add_argparse_args(parser)
    args = parser.parse_args()
    model = SegmentTask(classes=21)
    trainer = Trainer.from_argparse_args(args, max_epochs=50)
    trainer.fit(model)
