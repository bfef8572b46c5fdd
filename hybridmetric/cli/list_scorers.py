"""``hybridmetric scorers``: list the available scorers and their settings."""

from __future__ import annotations

import argparse

from hybridmetric import scorers as registry
from hybridmetric.signature import format_value


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("scorers", help="list the available scorers and their settings")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    broken = []
    for name, origin in registry.available().items():
        try:
            cls = registry.get(name)
        except ValueError as exc:  # (a third-party one: the others are still listed)
            broken.append(str(exc))
            print(f"{name}  ({origin})\n    cannot be loaded: see below")
            continue
        print(f"{name}  ({origin})")
        if cls.description:
            print(f"    {cls.description}")
        print(f"    columns: {', '.join(cls.column_names())}")
        if cls.needs:
            print(f"    needs each row's {' and '.join(cls.needs)} (a row without: NaN)")
        # each setting at its default, as the command line and the signature write values
        options = [f"--set {name}.{key}={format_value(spec.default)}"
                   for key, spec in cls.settings_spec.items()]
        width = max(map(len, options), default=0)
        for option, spec in zip(options, cls.settings_spec.values(), strict=True):
            choices = f"{{{', '.join(map(format_value, spec.choices))}}}  " if spec.choices else ""
            print(f"    {option:<{width}}  {choices}{spec.help}")
    if broken:
        raise ValueError("; ".join(broken))
    return 0

