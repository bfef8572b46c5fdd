"""Options shared by several commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from hybridmetric import scorers as registry
from hybridmetric.scorers import Scorer
from hybridmetric.scoring import signature_path

#: The scorers that ``--allow-network`` and ``--device`` set (their ``allow_network`` and
#: ``device`` settings).
TAKE_ALLOW_NETWORK = ("pass_rate", "dibia_combined")
TAKE_DEVICE = ("codebertscore",)


def seed(text: str) -> int:
    """An argparse type: a seed, a whole number of 0 or more (what numpy's generators take)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a whole number of 0 or more, got {text!r}")
    return value


def check_output(path: str, folder: bool, example: str, scores: str | None = None) -> None:
    """Refuse, before any work, an ``-o`` that cannot be written: a file where a ``folder`` is
    wanted (one that holds ``example``), a folder where a file is, a file on its way, or the
    ``scores`` file the command reads or its sidecar, which it would overwrite."""
    target = Path(path)
    for read in () if scores is None else (scores, str(signature_path(scores))):
        if os.path.realpath(path) == os.path.realpath(read):
            raise ValueError(f"-o {path} would overwrite {read}, which this command reads; "
                             f"give another file, e.g. {example}")
    if folder and target.exists() and not target.is_dir():
        raise ValueError(f"-o {path} is a file; give a folder (it will hold {example})")
    if not folder and target.is_dir():
        raise ValueError(f"-o {path} is a folder; give a file name, e.g. {target / example}")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"-o {path}: {parent} is a file, not a folder")
            return


def add_where_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--where FIELD=VALUE`` (repeatable), for commands that ``what`` (``audit``) part of a
    table."""
    parser.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                        help=f"{what} only the rows whose FIELD is VALUE (e.g. language=java); "
                             "repeat it: rows with any of the values given for a field, and "
                             "every field named (language=java --where system=codex)")


def add_scorer_options(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--scorers", default=None,
                        help=f"comma-separated scorer names, or ALIAS=SCORER (default: {default});"
                             " see 'hybridmetric scorers'")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="SCORER.KEY=VALUE", help="a scorer setting; repeatable")
    parser.add_argument("--allow-network", action="store_true",
                        help="let tests reach the network (pass_rate, dibia_combined); only for "
                             "trusted tests")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"),
                        help="where CodeBERTScore runs (default: auto)")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bars (scoring's, and a model's as it loads)")


def progress_of(args: argparse.Namespace) -> bool | None:
    """``scoring.score``'s ``progress`` from ``--no-progress`` (None: a bar on a terminal, a
    line a minute in a log). Where no bar is shown, neither are those of the libraries that
    load a model (transformers' "Loading weights"), whether or not they were imported yet."""
    if not args.no_progress and sys.stderr.isatty():
        return None
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # (read as huggingface_hub is imported)
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers.utils.logging" in sys.modules:
        sys.modules["transformers.utils.logging"].disable_progress_bar()
    return False if args.no_progress else None


def build_scorers(args: argparse.Namespace, defaults: Sequence[str] = ()) -> list[Scorer]:
    """The scorers ``--scorers`` names, with ``defaults`` (``--set`` assignments) under the
    command line's own ``--device``, ``--allow-network`` and ``--set``."""
    entries = [n.strip() for n in args.scorers.split(",") if n.strip()]
    if not entries:
        raise ValueError("--scorers is empty; name at least one scorer")
    named = [registry.split_name(entry) for entry in entries]
    shortcuts: list[tuple[str, str]] = []  # (an assignment, the flag that made it)
    for flag, value, said, setting, takers in (  # (said: as an error names the flag)
            ("--allow-network", "true" if args.allow_network else None, "--allow-network",
             "allow_network", TAKE_ALLOW_NETWORK),
            ("--device", args.device, f"--device {args.device}", "device", TAKE_DEVICE)):
        if value is None:
            continue
        taken = [f"{alias}.{setting}={value}" for alias, name in named if name in takers]
        if not taken:
            raise ValueError(f"{flag}: no selected scorer takes it ({', '.join(takers)}); "
                             "it would do nothing")
        shortcuts += [(text, said) for text in taken]
    given: dict[str, str] = {}
    for text, said in [*shortcuts, *((text, f"--set {text}") for text in args.settings)]:
        target = text.partition("=")[0].strip()  # (a card's defaults come first; these win)
        if target in given:
            raise ValueError(f"{target} is given twice ({given[target]}; {said}); give it once")
        given[target] = said
    settings = registry.parse_settings([*defaults, *(text for text, _ in shortcuts),
                                        *args.settings], entries)
    return registry.build(entries, settings)
