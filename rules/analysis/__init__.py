"""What the rules know about a file, computed once per file and shared, in four layers; each
imports only the layers before it (tests/test_architecture.py checks it):

``syntax`` -> ``model`` -> ``facts`` -> ``fixes``

- ``syntax``: the parsed tree and its index (``RuleContext``), call arguments and literals, which
  qualified name a name stands for, calls of the file's own functions, the torch names we know.
- ``model``: the training model: step loops and eval loops, what the names hold (optimizers,
  loaders, models, criteria), tensors versus host values, the code one step runs.
- ``facts``: facts about the whole program: when code runs, where objects flow, frameworks,
  devices and GPU use, workload, keyword dicts, the trained model and the device variable.
- ``fixes``: fix builders shared by several rules: keyword arguments, statements, imports,
  module-level settings, dict edits.

A helper that serves one rule lives beside that rule in its family package instead.
See docs/architecture.md.
"""
