import torch


def train_amp(args, model, snapshot_path):
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    for image, label in args.loader:
        image, label = image.cuda(non_blocking=True), label.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(image), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), snapshot_path)
