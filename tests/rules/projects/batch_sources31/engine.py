import torch
import torch.nn.functional as F


def train(cfg, model, train_iter, dev_iter):
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    for epoch in range(cfg.epochs):
        model.train()
        for step, (inputs, labels) in enumerate(train_iter):
            logits = model(inputs)
            loss = F.cross_entropy(logits, labels)
            model.zero_grad()
            loss.backward()
            optimizer.step()
        evaluate(model, dev_iter)


def evaluate(model, data_iter):
    model.eval()
    total = torch.zeros((), device="cuda")
    with torch.no_grad():
        for inputs, labels in data_iter:
            total += F.cross_entropy(model(inputs), labels, reduction="sum")
    return total
