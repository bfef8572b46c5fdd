"""``hybridmetric scorers``: list the available scorers and their settings."""

from __future__ import annotations

import argparse

from hybridmetric import scorers as registry


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("scorers", help="list the available scorers and their settings")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name, origin in registry.available().items():
        cls = registry.get(name)
        print(f"{name}  ({origin})")
        if cls.description:
            print(f"    {cls.description}")
        print(f"    columns: {', '.join(cls.column_names())}")
        for key, spec in cls.settings_spec.items():
            choices = f" {{{', '.join(map(str, spec.choices))}}}" if spec.choices else ""
            print(f"    --set {name}.{key}={spec.default!s:<10}{choices}  {spec.help}")
    return 0

