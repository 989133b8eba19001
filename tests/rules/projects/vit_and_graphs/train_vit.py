import torch
from torch.utils.data import DataLoader

from nets.vit import Encoder

if __name__ == "__main__":
    torch.set_float32_matmul_precision("high")
    model = Encoder().cuda()
    model.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    loader = DataLoader(torch.load("images.pt"), batch_size=256, num_workers=8, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(90):
        for images, labels in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(images.cuda(non_blocking=True)),
                                                         labels.cuda(non_blocking=True))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
