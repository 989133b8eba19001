"""Base-model entry: hands the switch to the trainer; the launch script passes --use_fp16 True."""
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
    model.compile()
    TrainLoop(model, image_loader(args.data_dir, args.batch_size), args.lr, use_fp16=args.use_fp16).run()


if __name__ == "__main__":
    main()
