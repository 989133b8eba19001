import pytorch_lightning as pl
import torch

from vlm import objectives


class VisionLanguage(pl.LightningModule):
    def __init__(self, config):
        super().__init__()
        self.save_hyperparameters(config)
        self.encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(768, 12), 6)
        self.itm_head = torch.nn.Linear(768, 2)
        self.vqa_head = torch.nn.Linear(768, config["vqa_labels"])
        self.current_tasks = list(config["tasks"])

    def infer(self, batch):
        return {"cls_feats": self.encoder(batch["tokens"])[:, 0]}

    def forward(self, batch):
        ret = {}
        if "itm" in self.current_tasks:
            ret.update(objectives.compute_itm(self, batch))
        if "vqa" in self.current_tasks:
            ret.update(objectives.compute_vqa(self, batch))
        return ret

    def training_step(self, batch, batch_idx):
        output = self(batch)
        return sum(v for k, v in output.items() if "loss" in k)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4, fused=True)
