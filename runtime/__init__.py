"""Runtime shim: measures a training script from inside its own interpreter.

Run as ``python -m gpuperf_rewrite.runtime --out result.json train.py -- args``.
This package imports only the standard library, torch and (optionally) pynvml, so it works in a
user's environment where libcst and click are absent. Importing the package itself imports
nothing heavy: the engine reads ``report``, ``diagnosis`` and ``merge`` without pulling in torch.
"""

from .schema import OK_STATUSES, SCHEMA_VERSION, STATUSES

__all__ = ["OK_STATUSES", "SCHEMA_VERSION", "STATUSES"]
