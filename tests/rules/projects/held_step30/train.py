import argparse

from trainers.wgan_trainer import WGANTrainer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/celeba")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    trainer = WGANTrainer(args.data, args.epochs)
    trainer.train()


if __name__ == "__main__":
    main()
