"""The rule catalogue: one module per rule, discovered by ``gpuperf_rewrite.lint.registry``.

Rules are pure (source in, findings and fixes out) and import nothing from the engine.
"""
