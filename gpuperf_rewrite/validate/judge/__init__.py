"""Judging A against B: run records, the loss check, the statistics and the sequential A/B, which fixes to keep."""
