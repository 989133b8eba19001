"""The model class is named by the config (a target string); the Trainer is built here."""
import sys

import pytorch_lightning as pl
import yaml

from tasks.util import build_from_config

if __name__ == "__main__":
    config = yaml.safe_load(open(sys.argv[1]))
    model = build_from_config(config["model"])
    trainer = pl.Trainer(accelerator="gpu", precision="bf16-mixed", benchmark=True, max_epochs=config["epochs"])
    trainer.fit(model)
