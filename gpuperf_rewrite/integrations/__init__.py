"""Integrations with other services (GitHub)."""
