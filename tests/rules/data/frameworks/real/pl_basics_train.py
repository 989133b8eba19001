# Held-out shape of Lightning-AI/pytorch-lightning examples/pytorch/basics/train.py
# (4f25b4ebb05aee19be7adc49244fd9abb7bd3352, Apache-2.0): condensed and rewritten here, not the
# original text. `import lightning as L`, a DataLoader handed to fit, the Trainer on its defaults.
import lightning as L
from lightning.pytorch.demos import DemoLanguageModel, WikiText2
from torch.utils.data import DataLoader


def main():
    L.seed_everything(42)
    train_dataset = WikiText2("data/wikitext-2/train.txt")
    train_dataloader = DataLoader(train_dataset, batch_size=20)
    model = DemoLanguageModel(ntokens=len(train_dataset.dictionary))
    trainer = L.Trainer(gradient_clip_val=0.25, max_epochs=20)
    trainer.fit(model, train_dataloader)


if __name__ == "__main__":
    main()
