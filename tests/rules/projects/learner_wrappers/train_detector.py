"""The loop hands each batch to the trainer module, which steps the detector."""
import torch

from detector import DetectorTrainer, TinyDetector

torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")


def train(loader, epochs=14):
    detector = TinyDetector()
    trainer = DetectorTrainer(detector).cuda()
    for epoch in range(epochs):
        for images, targets in loader:
            trainer.train_step(images.cuda(non_blocking=True), targets.cuda(non_blocking=True))


if __name__ == "__main__":
    train([])
