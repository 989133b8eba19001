import torch

from learner import MixedPrecisionLearner

torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")


def main(loader, device):
    learner = MixedPrecisionLearner(device)
    for x, y in loader:
        learner.train_on_batch(x.to(device, non_blocking=True), y.to(device, non_blocking=True))


if __name__ == "__main__":
    main([], torch.device("cuda"))
