"""A graph model trained full-batch: each epoch is one step, and the step runs the model's
metrics method, which copies its scores to the host for sklearn behind `if t.is_cuda:` (a check
that passes on every CUDA run), here and in a helper of another package."""
import argparse

import torch

from nets.graph import LinkScorer, NodeClassifier


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="nc")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    device = torch.device("cuda")
    graph = torch.load("graph.pt")
    graph = {k: v.to(device) for k, v in graph.items()}
    model = NodeClassifier(64, 7) if args.task == "nc" else LinkScorer(64)
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(args.epochs):
        model.train()
        opt.zero_grad()
        feats = model(graph["features"])
        train_metrics = model.evaluate(feats, graph, "train")
        train_metrics["loss"].backward()
        opt.step()


if __name__ == "__main__":
    main()
