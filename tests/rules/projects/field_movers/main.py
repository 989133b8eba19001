import torch
from torch.utils.data import DataLoader

from features import features_from_record, place_tables


def train(model, dataset, tables, device, epochs=3):
    loader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=4, pin_memory=True,
                        persistent_workers=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    tables = place_tables(tables, device)
    for _ in range(epochs):
        for record in loader:
            item_ids, lengths, ratings, target = features_from_record(record, device, 50)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(item_ids, lengths, ratings, tables, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
