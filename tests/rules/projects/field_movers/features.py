"""Turning a loader's record into model inputs: the helper moves every field itself."""
import torch


def features_from_record(record, device, pad_to: int):
    item_ids = record["item_ids"].to(device)
    lengths = record["lengths"].to(device)
    ratings = record["ratings"].to(device).float()
    target = record["target"].to(device).unsqueeze(1)
    if pad_to > item_ids.size(1):
        pad = torch.zeros(item_ids.size(0), pad_to - item_ids.size(1), dtype=item_ids.dtype, device=device)
        item_ids = torch.cat([item_ids, pad], dim=1)
    return item_ids, lengths, ratings, target


def place_tables(tables, device):
    """Run once, before training: the lookup tables go to the device a single time."""
    tables.users = tables.users.to(device)
    tables.items = tables.items.to(device)
    return tables
