"""Options shared by several commands."""

from __future__ import annotations

import argparse

from hybridmetric import scorers as registry
from hybridmetric.scorers import Scorer


def add_scorer_options(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--scorers", default=None,
                        help=f"comma-separated scorer names (default: {default}); "
                             "see 'hybridmetric scorers'")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="SCORER.KEY=VALUE", help="a scorer setting; repeatable")


def build_scorers(args: argparse.Namespace) -> list[Scorer]:
    names = [n.strip() for n in args.scorers.split(",") if n.strip()]
    if not names:
        raise ValueError("--scorers is empty; name at least one scorer")
    return registry.build(names, registry.parse_settings(args.settings, names))
