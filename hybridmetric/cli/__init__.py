"""The ``hybridmetric`` command line (see DESIGN.md, "Command line"); one module a command."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from hybridmetric import __version__
from hybridmetric.cli import audit, fit, list_scorers, passk, run, score
from hybridmetric.cli.signals import exit_status, terminate
from hybridmetric.schema import RecordError

COMMANDS = (run, score, fit, audit, passk, list_scorers)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="hybridmetric",
        description="Score generated code for value, fit a hybrid metric, audit agreement.",
    )
    root.add_argument("--version", action="version", version=f"hybridmetric {__version__}")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main_thread else None
    try:
        return args.func(args) or 0
    except KeyboardInterrupt as stop:
        print("hybridmetric: interrupted", file=sys.stderr)
        return exit_status(stop)
    except (RecordError, ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"hybridmetric: error: {error}", file=sys.stderr)
        return 2
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
