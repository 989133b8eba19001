class AlternatingBatches:
    """Serves batches from two loaders in turn, forever: each inner loop restarts its loader."""

    def __init__(self, head_loader, tail_loader):
        self.head = self._forever(head_loader)
        self.tail = self._forever(tail_loader)
        self.step = 0

    def __next__(self):
        self.step += 1
        return next(self.head if self.step % 2 else self.tail)

    @staticmethod
    def _forever(loader):
        while True:
            for batch in loader:
                yield batch
