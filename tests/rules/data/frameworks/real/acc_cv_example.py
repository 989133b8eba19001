# Held-out shape of huggingface/accelerate examples/cv_example.py
# (1d57b830a07f07f655fc298f2096de09c2998083, Apache-2.0): condensed and rewritten here, not the
# original text. A timm ResNet-50d, worker loaders, Adam, OneCycleLR.
import argparse
import os
import re

import numpy as np
import PIL
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from timm import create_model
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import Compose, RandomResizedCrop, Resize, ToTensor


def extract_label(fname):
    return re.search(r"^(.*)_\d+\.jpg$", fname.split(os.path.sep)[-1]).groups()[0]


class PetsDataset(Dataset):
    def __init__(self, file_names, image_transform=None, label_to_id=None):
        self.file_names = file_names
        self.image_transform = image_transform
        self.label_to_id = label_to_id

    def __len__(self):
        return len(self.file_names)

    def __getitem__(self, idx):
        fname = self.file_names[idx]
        image = PIL.Image.open(fname).convert("RGB")
        if self.image_transform is not None:
            image = self.image_transform(image)
        return {"image": image, "label": self.label_to_id[extract_label(fname)]}


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr, num_epochs, batch_size = config["lr"], int(config["num_epochs"]), int(config["batch_size"])
    image_size = (config["image_size"], config["image_size"])
    file_names = [os.path.join(args.data_dir, f) for f in os.listdir(args.data_dir) if f.endswith(".jpg")]
    id_to_label = sorted(set(extract_label(f) for f in file_names))
    label_to_id = {lbl: i for i, lbl in enumerate(id_to_label)}
    set_seed(int(config["seed"]))
    perm = np.random.permutation(len(file_names))
    cut = int(0.8 * len(file_names))
    train_dataset = PetsDataset([file_names[i] for i in perm[:cut]],
                                image_transform=Compose([RandomResizedCrop(image_size, scale=(0.5, 1.0)), ToTensor()]),
                                label_to_id=label_to_id)
    eval_dataset = PetsDataset([file_names[i] for i in perm[cut:]], image_transform=Compose([Resize(image_size), ToTensor()]),
                               label_to_id=label_to_id)
    train_dataloader = DataLoader(train_dataset, shuffle=True, batch_size=batch_size, num_workers=4)
    eval_dataloader = DataLoader(eval_dataset, shuffle=False, batch_size=batch_size, num_workers=4)
    model = create_model("resnet50d", pretrained=True, num_classes=len(label_to_id))
    model = model.to(accelerator.device)
    for param in model.parameters():
        param.requires_grad = False
    for param in model.get_classifier().parameters():
        param.requires_grad = True
    mean = torch.tensor(model.default_cfg["mean"])[None, :, None, None].to(accelerator.device)
    std = torch.tensor(model.default_cfg["std"])[None, :, None, None].to(accelerator.device)
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lr / 25)
    lr_scheduler = OneCycleLR(optimizer=optimizer, max_lr=lr, epochs=num_epochs, steps_per_epoch=len(train_dataloader))
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)
    for epoch in range(num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            inputs = (batch["image"] - mean) / std
            outputs = model(inputs)
            loss = torch.nn.functional.cross_entropy(outputs, batch["label"])
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        model.eval()
        accurate = 0
        num_elems = 0
        for _, batch in enumerate(eval_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with torch.no_grad():
                outputs = model((batch["image"] - mean) / std)
            predictions, references = accelerator.gather_for_metrics((outputs.argmax(dim=-1), batch["label"]))
            accurate_preds = predictions == references
            num_elems += accurate_preds.shape[0]
            accurate += accurate_preds.long().sum()
        accelerator.print(f"epoch {epoch}: {100 * accurate.item() / num_elems:.2f}")
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    training_function({"lr": 3e-2, "num_epochs": 3, "seed": 42, "batch_size": 64, "image_size": 224}, args)


if __name__ == "__main__":
    main()
