"""The bot's one error type, and the token scrubbing every printed message goes through."""

from __future__ import annotations


class BotError(Exception):
    """A problem the user must fix (exit 2); the message says what, never the token."""


def scrub(text: str, token: str | None) -> str:
    """``text`` with the token replaced by ``***``."""
    return text.replace(token, "***") if token else text
