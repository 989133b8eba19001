import argparse

import torch
import torch.nn.functional as F

from nets import ContrastiveModel, get_backbone

parser = argparse.ArgumentParser()
parser.add_argument("--backbone", default="resnet50")
parser.add_argument("--epochs", type=int, default=100)


def nt_xent(z_i, z_j, temperature=0.5):
    z = F.normalize(torch.cat([z_i, z_j]), dim=1)
    sim = z @ z.t() / temperature
    targets = torch.arange(z.size(0), device=z.device).roll(z_i.size(0))
    return F.cross_entropy(sim.fill_diagonal_(-1e9), targets)


def main(args, loader):
    encoder = get_backbone(args.backbone)
    n_features = encoder.fc.in_features
    model = ContrastiveModel(encoder, 128, n_features).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)
    for epoch in range(args.epochs):
        for x_i, x_j in loader:
            x_i, x_j = x_i.cuda(non_blocking=True), x_j.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = nt_xent(*model(x_i, x_j))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main(parser.parse_args(), loader=None)
