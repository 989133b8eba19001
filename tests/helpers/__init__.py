"""Fakes and builders shared by the tests (importable as ``helpers.*``: pytest puts tests/ on sys.path)."""
