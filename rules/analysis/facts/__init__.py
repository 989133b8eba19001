"""Layer 3, program facts: when code runs, where objects flow, frameworks, devices and GPU use,
workload, keyword dicts, the trained model. Imports ``syntax`` and ``model``."""
