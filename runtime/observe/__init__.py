"""Observation of objects: what the training builds and does (DataLoaders, optimizers, models,
switches, host reads, copies, config files), each with the first-party source line that built it
(the result document's ``observed`` key). Imports :mod:`..schema` only."""
