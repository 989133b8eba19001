"""Data-loading rules (GP2xx): DataLoader workers, pinned memory, persistent workers, and the
helpers only they use (their arguments, iteration, worker safety, pickling)."""
