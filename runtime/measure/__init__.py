"""Measurement: step boundaries and losses, time, input waits, host syncs and reads, mixed
precision, compilation, DDP communication, GPU telemetry, traces and the run's fingerprint.
Imports :mod:`..schema` and :mod:`..observe` only."""
