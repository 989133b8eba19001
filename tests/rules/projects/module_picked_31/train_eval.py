import torch
import torch.nn.functional as F


def train(config, model, train_iter, dev_iter):
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, fused=True)
    for epoch in range(config.num_epochs):
        for texts, labels in train_iter:
            outputs = model(texts)
            model.zero_grad(set_to_none=True)
            loss = F.cross_entropy(outputs, labels)
            loss.backward()
            optimizer.step()
        evaluate(model, dev_iter)


@torch.no_grad()
def evaluate(model, data_iter):
    model.eval()
    total = 0
    for texts, labels in data_iter:
        total += (model(texts).argmax(1) == labels).sum()
    model.train()
    return total
