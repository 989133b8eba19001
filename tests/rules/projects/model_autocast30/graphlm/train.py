import argparse

import torch
from torch.utils.data import DataLoader

from graphlm.models import load_model


def main(args):
    torch.cuda.manual_seed_all(args.seed)
    samples = torch.load(args.data)
    loader = DataLoader(samples, batch_size=args.batch_size, shuffle=True, num_workers=4, pin_memory=True,
                        persistent_workers=True)
    model = load_model[args.model_name](args=args)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": params, "lr": args.lr}], betas=(0.9, 0.95), fused=True)
    for epoch in range(args.epochs):
        model.train()
        for step, batch in enumerate(loader):
            optimizer.zero_grad(set_to_none=True)
            loss = model(batch)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", default="graph")
    parser.add_argument("--llm_path", default="llama-7b")
    parser.add_argument("--gnn_dim", type=int, default=1024)
    parser.add_argument("--data", default="graphs.pt")
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    main(parser.parse_args())
