import torch
import config as CFG
from dataset import ImageCaptions


def build_loaders(frame, mode):
    dataset = ImageCaptions(frame, mode)
    return torch.utils.data.DataLoader(dataset, batch_size=CFG.batch_size, num_workers=CFG.num_workers,
                                       shuffle=mode == "train")


def main():
    train_loader = build_loaders(None, "train")
    model = torch.nn.Linear(4, 4).to(CFG.device)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    for epoch in range(10):
        for batch in train_loader:
            batch = {k: v.to(CFG.device) for k, v in batch.items()}
            loss = model(batch["x"]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
