"""Stopping a command: SIGTERM is taken as Ctrl-C is (finished rows kept, running programs
stopped), and the exit status says which signal it was."""

from __future__ import annotations

import signal
from pathlib import Path

from hybridmetric.signature import say


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would raise KeyboardInterrupt."""


def terminate(signum: int, frame: object) -> None:
    """The SIGTERM handler ``main`` installs."""
    raise Terminated


def exit_status(stop: KeyboardInterrupt) -> int:
    """What a shell expects of a program that a signal stopped: 128 + its number."""
    return 128 + (signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)


def interrupted(stop: KeyboardInterrupt, journal: Path) -> int:
    """Say where the rows a stopped scoring run finished are (when it finished any: else the
    plain message) and return the signal's exit status."""
    kept = f"; finished rows are kept in {journal}; rerun with --resume to continue"
    say(f"hybridmetric: interrupted{kept if journal.exists() else ''}")
    return exit_status(stop)
