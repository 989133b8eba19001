"""One self-contained HTML page per measurement (``--html PATH``, ``gpuperf-rewrite report``).

The page is built from the JSON document a command writes with ``--json`` (profile, ab, --apply,
baseline, regress, regress --history, and the GPU-proof summary), so a saved document renders the
same page later. Charts are static SVG drawn by matplotlib (the ``report`` extra); nothing is
fetched when the page is opened. Imports: lint (the atomic write, rule metadata), runtime (the
profile's text report) and validate (the A/B's text report): never cli or integrations.
"""
