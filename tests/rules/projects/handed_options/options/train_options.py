from .base_options import BaseOptions


class TrainOptions(BaseOptions):
    def initialize(self, parser):
        parser = BaseOptions.initialize(self, parser)
        parser.add_argument("--lr", type=float, default=2e-4)
        parser.add_argument("--niter", type=int, default=50)
        return parser
