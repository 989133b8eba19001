"""A graph-ranking trainer: each step builds its index tensors from Python lists and hands them
to the project's device helpers (common.devices), which move what they are handed."""
import torch
import torch.nn.functional as F

from common import devices
from common.devices import cuda, put, scaled


def step(model, optimizer, graph, device):
    nodes, edges, labels = graph.sample(256)
    x = cuda(torch.LongTensor(nodes))
    adj = devices.put(torch.tensor(edges).t().contiguous(), device)
    y = put(torch.as_tensor(labels).float(), device)
    w = scaled(torch.ones(len(labels)), 0.5)
    loss = (F.binary_cross_entropy_with_logits(model(x, adj), y, reduction="none") * w.to(y)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main(model, graph, epochs, device):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for _ in range(graph.steps_per_epoch):
            step(model, optimizer, graph, device)
