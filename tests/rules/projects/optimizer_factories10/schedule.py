"""A LightningModule's optimizer set-up helper using transformers' AdamW (the ViLT shape)."""
import torch
from transformers.optimization import AdamW, get_cosine_schedule_with_warmup


def set_schedule(pl_module):
    lr = pl_module.hparams.config["learning_rate"]
    wd = pl_module.hparams.config["weight_decay"]
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    groups = [
        {"params": [p for n, p in pl_module.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": wd},
        {"params": [p for n, p in pl_module.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    if pl_module.hparams.config["optim_type"] == "adamw":
        optimizer = AdamW(groups, lr=lr, eps=1e-8, betas=(0.9, 0.98))
    else:
        optimizer = torch.optim.SGD(groups, lr=lr, momentum=0.9)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=1000, num_training_steps=100000)
    return [optimizer], [{"scheduler": scheduler, "interval": "step"}]
