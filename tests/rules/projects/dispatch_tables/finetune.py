import torch

from segment.net import SegNet
import trainers

ROUTINES = dict(synapse=trainers.trainer_synapse, acdc=trainers.trainer_acdc)


def main(args):
    torch.backends.cudnn.benchmark = True
    model = SegNet(num_classes=4).to("cuda")
    routine = ROUTINES.get(args.dataset, trainers.trainer_synapse)
    routine(args, model, "runs/finetune")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="synapse")
    main(parser.parse_args())
