import torch

from sonar.data import EchoData
from sonar.tuning import tuning_loader


def main(cfg, train_set, model):
    loader = EchoData(cfg, train_set).train_dataloader()
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    for _ in range(cfg.trainer.max_epochs):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            loss.backward()
            opt.step()
            opt.zero_grad()
    for x, y in tuning_loader(train_set, {"drop_last": True}):
        pass


if __name__ == "__main__":
    main(None, None, None)
