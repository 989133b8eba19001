import pytorch_lightning as pl
import yaml

from systems.ray_system import RaySystem


def main():
    with open("configs/default.yaml") as f:
        config = yaml.safe_load(f)
    system = RaySystem(config["system"])
    trainer = pl.Trainer(**config["trainer"])
    trainer.fit(system)


if __name__ == "__main__":
    main()
