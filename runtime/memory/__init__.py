"""Memory: per-step samples, peaks and headroom (``sampling``), and the growth (leak) verdict
(``growth``). Imports :mod:`..schema` only."""
