"""Runtime shim: measures a training script from inside its own interpreter.

Run as ``python -m gpuperf_rewrite.runtime --out result.json train.py -- args``.
This package imports only the standard library, torch and (optionally) pynvml, so it works in a
user's environment where libcst and click are absent. Importing the package itself imports
nothing heavy: the engine reads ``report``, ``diagnosis`` and ``merge`` without pulling in torch.
"""

SCHEMA_VERSION = 1
STATUSES = ("completed", "step_limit", "crashed", "timeout", "no_steps")
