# Held-out shape of public Lightning multi-GPU fine-tunes that pick the DDP strategy by its
# registry string (Apache-2.0): condensed and rewritten here, not the original text.
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoModelForSequenceClassification


class LitClassifier(L.LightningModule):
    def __init__(self, name: str = "distilbert-base-uncased"):
        super().__init__()
        self.model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)

    def training_step(self, batch, batch_idx):
        ids, labels = batch
        out = self.model(input_ids=ids, labels=labels)
        self.log("train_loss", out.loss, on_step=True, prog_bar=True, sync_dist=True)
        return out.loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=2e-5, fused=True)


if __name__ == "__main__":
    torch.set_float32_matmul_precision("high")
    data = TensorDataset(torch.randint(0, 1000, (512, 64)), torch.randint(0, 2, (512,)))
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)
    model = LitClassifier()
    model.compile()
    trainer = L.Trainer(accelerator="gpu", devices=4, strategy="ddp_find_unused_parameters_true",
                        precision="bf16-mixed", max_epochs=3)
    trainer.fit(model, loader)
