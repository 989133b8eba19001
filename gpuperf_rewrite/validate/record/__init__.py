"""Recording in git: commits, hooks, notes (refs/notes/gpuperf), baselines and regressions."""
