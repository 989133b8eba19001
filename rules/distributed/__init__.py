"""Distributed rules (GP5xx): DataParallel, DDP bucket views, DistributedSampler epochs."""
