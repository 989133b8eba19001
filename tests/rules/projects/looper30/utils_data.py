def infiniteloop(dataloader):
    while True:
        for x, y in iter(dataloader):
            yield x


def first_batches(dataloader, n):
    for i, (x, _) in enumerate(dataloader):
        if i == n:
            return
        yield x
