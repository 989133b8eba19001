"""The linter: parse-only, never imports or runs the code it checks."""
