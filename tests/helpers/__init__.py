"""Fakes and builders shared by the tests (``from tests.helpers.abfakes import ...``)."""
