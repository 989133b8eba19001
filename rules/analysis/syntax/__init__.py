"""Layer 1, syntax and names: the tree, its one index per file (``RuleContext``), call arguments,
literals, qualified-name resolution, calls of the file's own functions. Knows no training."""
