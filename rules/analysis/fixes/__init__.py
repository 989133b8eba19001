"""Layer 4, fix builders shared by several rules: keyword arguments, statements, imports,
module-level settings, dict edits. Imports the layers below and the rule API (``rules._api``)."""
