"""The ``hybridmetric`` command line (see DESIGN.md, "Command line"); one module a command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hybridmetric import __version__
from hybridmetric.cli import audit, fit, list_scorers, passk, run, score
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
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        print("hybridmetric: interrupted", file=sys.stderr)
        return 130
    except (RecordError, ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"hybridmetric: error: {error}", file=sys.stderr)
        return 2
