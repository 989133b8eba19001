import torch


class PaddedIterator:
    """Hands out (ids, lengths), labels batches of pre-tokenised rows, built on the fly."""

    def __init__(self, rows, batch_size, device):
        self.rows, self.batch_size, self.device = rows, batch_size, device
        self.index = 0

    def _to_tensor(self, chunk):
        ids = torch.LongTensor([row[0] for row in chunk]).to(self.device)
        labels = torch.LongTensor([row[1] for row in chunk]).to(self.device)
        lengths = torch.LongTensor([row[2] for row in chunk]).to(self.device)
        return (ids, lengths), labels

    def __next__(self):
        if self.index * self.batch_size >= len(self.rows):
            self.index = 0
            raise StopIteration
        chunk = self.rows[self.index * self.batch_size:(self.index + 1) * self.batch_size]
        self.index += 1
        return self._to_tensor(chunk)

    def __iter__(self):
        return self


def build_iterator(rows, cfg):
    return PaddedIterator(rows, cfg.batch_size, cfg.device)
