import torch


def build_dataset(config):
    vocab = {"<pad>": 0}
    rows = []
    with open(config.train_path) as f:
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            rows.append(([vocab.setdefault(ch, len(vocab)) for ch in text][:32], int(label)))
    return vocab, rows[:-1000], rows[-1000:]


def build_iterator(rows, config, batch_size=128):
    batches = []
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        texts = torch.tensor([r[0] + [0] * (32 - len(r[0])) for r in chunk], device=config.device)
        labels = torch.tensor([r[1] for r in chunk], device=config.device)
        batches.append((texts, labels))
    return batches
