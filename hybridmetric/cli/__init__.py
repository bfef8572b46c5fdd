"""The ``hybridmetric`` command line (see DESIGN.md, "Command line"); one module a command.

The commands are imported by :func:`main`, under its Ctrl-C and SIGTERM handling: they bring in
pandas, the better part of a second, and an interrupt meanwhile ends the command as any other
(status 130 or 143, no traceback)."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from collections.abc import Sequence

from hybridmetric import __version__
from hybridmetric.cli.signals import exit_status, terminate
from hybridmetric.signature import say

#: Where :class:`_StoreOnce` notes, in the namespace being filled, the options given so far
#: (taken out again by :func:`parse`).
_GIVEN = "_options_given"


class _StoreOnce(argparse._StoreAction):
    """A single-valued option (``-o``, ``--seed``, ...) that refuses to be given twice, where
    argparse would keep the last value without a word (``-o A ... --output B`` writing B)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault(_GIVEN, set())
        if self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} is given twice; give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """A command's parser: its single-valued options are :class:`_StoreOnce`."""

    def __init__(self, *args: object, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


def parser() -> argparse.ArgumentParser:
    from hybridmetric.cli import audit, fit, list_scorers, passk, run, score

    root = argparse.ArgumentParser(
        prog="hybridmetric",
        description="Score generated code for value, fit a hybrid metric, audit agreement.",
    )
    root.add_argument("--version", action="version", version=f"hybridmetric {__version__}")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                   parser_class=_Parser)
    for command in (run, score, fit, audit, passk, list_scorers):
        command.register(commands)
    return root


#: Options whose value may start with a minus (a scale of -2 to 2), which argparse would take
#: for an option of its own.
SIGNED_VALUES = ("--scale", "--useful")
#: What such a value may start with: a minus and a number, or what ``float`` reads as one.
_SIGNED = re.compile(r"-(?:\d|\.|inf|nan)", re.IGNORECASE)


def _joined(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--scale -2,2`` written ``--scale=-2,2``, as argparse reads it."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in SIGNED_VALUES and _SIGNED.match(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line ``argv`` (see :func:`_joined`), parsed."""
    args = parser().parse_args(_joined(argv))
    vars(args).pop(_GIVEN, None)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main_thread else None
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        return args.func(args) or 0
    except KeyboardInterrupt as stop:
        say("hybridmetric: interrupted")
        return exit_status(stop)
    except (ValueError, OSError, RuntimeError) as error:  # (a RecordError; a file not there)
        say(f"hybridmetric: error: {error}", keep="\t\n")  # (names show as they are: see say)
        return 2
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
