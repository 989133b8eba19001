"""The console entry point (``gpuperf-rewrite``, ``python -m gpuperf_rewrite``).

Separate from :mod:`gpuperf_rewrite.cli` so that it imports nothing: the command line's imports
(click, the lint engine) take a noticeable moment, and a Ctrl-C in that moment would otherwise
print a KeyboardInterrupt traceback. The handler is installed when this module is imported,
before anything else is (``os`` and ``signal`` are loaded by every interpreter at start-up); once
the CLI runs, its own handling prints "Interrupted." and exits 130, and so does this one.
"""

import _signal  # built in: no search of the path, the shortest window before the handler
import os


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"Interrupted.\n")
    os._exit(128 + signum)  # nothing ran yet: nothing to clean up or flush


_signal.signal(_signal.SIGINT, _interrupted_while_starting)


def main() -> None:
    try:
        from gpuperf_rewrite.cli import main as cli_main
    finally:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    cli_main()
