"""The test-suite, one package per source package (lint, rules, validate, integrations, runtime,
cli) plus helpers/ for the fakes and drivers they share: ``from tests.helpers.abfakes import ...``."""
