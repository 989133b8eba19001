from .base_options import BaseOptions


class TrainOptions(BaseOptions):
    def __init__(self):
        super().__init__()
        self.parser.add_argument("--niter", type=int, default=100)
        self.parser.add_argument("--lr", type=float, default=2e-4)
        self.parser.add_argument("--no_html", action="store_true")
