# The entry's parser lives in a module of its own (DiffDock / fairseq-style); the loader factory
# only receives the parsed `args`.
from argparse import ArgumentParser


def parse_train_args():
    parser = ArgumentParser()
    parser.add_argument("--data_dir", type=str, default="data/")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--num_dataloader_workers", type=int, default=0, help="workers of the train loader")
    parser.add_argument("--pin_memory", action="store_true", default=False)
    parser.add_argument("--val_workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=400)
    return parser.parse_args()
