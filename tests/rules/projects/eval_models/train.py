# The model class is picked by evaluating an option's value (`eval(args.model_name)`), among the
# classes a star import brings; the option's default lives in another module of the project.
import torch
from fields import *
from opts import config_parser

torch.backends.cudnn.benchmark = True


def reconstruction(args):
    device = torch.device("cuda")
    model = eval(args.model_name)(128).to(device)
    model = torch.compile(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.99), fused=True)
    scaler = torch.amp.GradScaler()
    for _ in range(args.n_iters):
        xyz = torch.rand(4096, 3, device=device) * 2 - 1
        target = torch.rand(4096, 4, device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(xyz), target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


if __name__ == "__main__":
    reconstruction(config_parser())
