"""The rule catalogue, by family: ``loop`` (GP1xx), ``data`` (GP2xx), ``precision`` (GP3xx),
``memory`` (GP4xx), ``distributed`` (GP5xx); one module per rule (``gpNNN_name.py``) in its
family's package, discovered by ``gpuperf_rewrite.lint.registry``. ``analysis`` holds what the
rules know about a file, in layers (see its docstring); ``_api`` is what a rule declares and
reports, ``_framework`` the same API in one import for code outside ``rules/``.

Rules are pure (source in, findings and fixes out) and import nothing from the engine.
"""

# The package that is not a family of rules.
ANALYSIS = "analysis"
