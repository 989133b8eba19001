import torch

from data.kg import KGSampler
from models.bpr import BPR


def train(user_dict, n_users, n_items, epochs=10, batch_size=1024):
    device = torch.device("cuda")
    data = KGSampler(user_dict, n_items)
    model = BPR(n_users, n_items).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for it in range(len(user_dict) // batch_size):
            users, pos, neg = data.generate_pairs(batch_size)
            users = users.to(device)
            pos = pos.to(device)
            neg = neg.to(device)
            loss = model(users, pos, neg)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for it in range(len(user_dict) // batch_size):
            feats = data.feature_batch(list(range(it, it + batch_size)))
            x = feats["x"].to(device)
            loss = model(x.long(), feats["y"].to(device), x.long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for it in range(10):
            users, pos = data.on_device_batch(batch_size, device)
            loss = model(users.to(device), pos.to(device), pos)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
