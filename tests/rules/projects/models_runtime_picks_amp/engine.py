import torch
import torch.nn.functional as F


def run_epoch(cfg, loader, optimizer, net):
    net.train()
    for images, labels in loader:
        images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(images)
            loss = F.cross_entropy(logits, labels)
        net.zero_grad()
        loss.backward()
        optimizer.step()
