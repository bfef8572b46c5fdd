"""Options shared by several commands."""

from __future__ import annotations

import argparse

from hybridmetric import scorers as registry
from hybridmetric.scorers import Scorer


def add_scorer_options(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--scorers", default=None,
                        help=f"comma-separated scorer names, or ALIAS=SCORER (default: {default});"
                             " see 'hybridmetric scorers'")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="SCORER.KEY=VALUE", help="a scorer setting; repeatable")
    parser.add_argument("--allow-network", action="store_true",
                        help="let tests reach the network (pass_rate); only for trusted tests")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"),
                        help="where CodeBERTScore runs (default: auto)")


def build_scorers(args: argparse.Namespace) -> list[Scorer]:
    entries = [n.strip() for n in args.scorers.split(",") if n.strip()]
    if not entries:
        raise ValueError("--scorers is empty; name at least one scorer")
    shortcuts = []
    for entry in entries:
        alias, name = registry.split_name(entry)
        if args.allow_network and name == "pass_rate":
            shortcuts.append(f"{alias}.allow_network=true")
        if args.device and name == "codebertscore":
            shortcuts.append(f"{alias}.device={args.device}")
    settings = registry.parse_settings(shortcuts + args.settings, entries)
    return registry.build(entries, settings)
