import pytorch_lightning as pl
import torch

from vlm.module import VisionLanguage
from vlm.data import make_datamodule

torch.set_float32_matmul_precision("high")
model = VisionLanguage({"vqa_labels": 3129, "tasks": ["itm", "vqa"]})
trainer = pl.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=1000)
trainer.fit(model, datamodule=make_datamodule())
