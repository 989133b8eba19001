import argparse


class BaseOptions:
    def initialize(self, parser):
        parser.add_argument("--dataroot", required=True, help="path to images")
        parser.add_argument("--batch_size", type=int, default=16)
        parser.add_argument("--nThreads", default=0, type=int, help="# threads for loading data")
        parser.add_argument("-j", "--workers", default=0, type=int, metavar="N",
                            help="number of data loading workers (default: 0)")
        parser.add_argument("--num_workers", type=int, default=0)
        return parser

    def parse(self):
        parser = self.initialize(argparse.ArgumentParser())
        return parser.parse_args()
