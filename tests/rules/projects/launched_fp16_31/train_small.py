"""A small-resolution entry no launch script runs with --use_fp16: float32 on every shipped run."""
import torch

from defaults import create_argparser
from nets import UNet
from trainer import TrainLoop
from data import image_loader


def main():
    args = create_argparser().parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    model = UNet(args.channels).cuda()
    if args.use_fp16:
        model.convert_to_fp16()
    model.compile()
    TrainLoop(model, image_loader(args.data_dir, args.batch_size), args.lr).run()


if __name__ == "__main__":
    main()
