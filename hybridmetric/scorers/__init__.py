"""The scorer registry: built-in scorers and third-party ones found through entry points.

A third-party package registers a :class:`~hybridmetric.scorers.base.Scorer` subclass in its
``pyproject.toml``::

    [project.entry-points."hybridmetric.scorers"]
    my_metric = "my_package.scoring:MyMetric"

Built-ins are imported only when used, so listing scorers does not load a model.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from hybridmetric.scorers.base import Scorer, Setting

ENTRY_POINT_GROUP = "hybridmetric.scorers"

BUILTIN: dict[str, str] = {
    "bleu": "hybridmetric.scorers.bleu:Bleu",
    "chrf": "hybridmetric.scorers.chrf:Chrf",
    "codebleu": "hybridmetric.scorers.codebleu:CodeBleu",
    "dibia_combined": "hybridmetric.scorers.dibia_combined:DibiaCombined",
    "edit_sim": "hybridmetric.scorers.edit_sim:EditSim",
    "exact_match": "hybridmetric.scorers.exact_match:ExactMatch",
    "rouge_l": "hybridmetric.scorers.rouge_l:RougeL",
    "codebertscore": "hybridmetric.scorers.codebertscore:CodeBertScore",
    "pass_rate": "hybridmetric.scorers.pass_rate:PassRate",
}

#: Names no scorer may be run under (``ALIAS=SCORER``): their ``score.`` columns mean something
#: to ``fit``, ``audit`` and ``passk``.
RESERVED_ALIASES = {"hybrid": "is the hybrid metric's prediction",
                    "pass": "is the verdict that all of a row's tests passed"}

__all__ = ["Scorer", "Setting", "available", "get", "build", "parse_settings", "third_party"]


def third_party(cls: type[Scorer]) -> str | None:
    """``module.Class`` of a scorer class that is not hybridmetric's own (whose errors are
    named with it); None for a built-in."""
    return None if cls.__module__.startswith("hybridmetric.") else (
        f"{cls.__module__}.{cls.__name__}")


def _load(target: str) -> type[Scorer]:
    module, _, attribute = target.partition(":")
    try:
        cls = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"the scorer {target} cannot be loaded ({exc!r}): fix or uninstall the "
                         f"package that registers it (entry-point group {ENTRY_POINT_GROUP})"
                         ) from None
    if not (isinstance(cls, type) and issubclass(cls, Scorer)):
        raise ValueError(f"{target} is not a hybridmetric Scorer subclass: fix or uninstall the "
                         f"package that registers it (entry-point group {ENTRY_POINT_GROUP})")
    return cls


def available() -> dict[str, str]:
    """Every scorer name mapped to where it comes from (``module:Class``)."""
    found = dict(BUILTIN)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in BUILTIN:
            raise ValueError(
                f"entry point '{point.name}' ({point.value}) clashes with a built-in scorer; "
                "rename it in the package that registers it"
            )
        found[point.name] = point.value
    return dict(sorted(found.items()))


def get(name: str) -> type[Scorer]:
    """The scorer class registered under ``name``."""
    registry = available()
    if name not in registry:
        raise ValueError(f"unknown scorer '{name}'; available scorers: {', '.join(registry)}")
    cls = _load(registry[name])
    if cls.name != name:
        raise ValueError(f"scorer registered as '{name}' calls itself '{cls.name}'")
    return cls


def split_name(entry: str) -> tuple[str, str]:
    """``ALIAS=SCORER`` (run a scorer under another name) or ``SCORER`` -> (alias, scorer)."""
    alias, sep, name = (part.strip() for part in entry.partition("="))
    if not sep:
        return alias, alias
    if not alias or not name or not alias.replace("_", "").isalnum():
        raise ValueError(f"expected ALIAS=SCORER with a word for ALIAS, got {entry!r}")
    if alias != name and (alias in RESERVED_ALIASES or alias in available()):
        raise ValueError(f"{entry!r}: the alias {alias!r} is taken (score.{alias} "
                         + RESERVED_ALIASES.get(alias, f"is the {alias} scorer's column")
                         + "); choose another name")
    return alias, name


def parse_settings(assignments: list[str], scorers: list[str]) -> dict[str, dict[str, str]]:
    """Turn ``SCORER.KEY=VALUE`` strings into ``{scorer: {key: value}}``; SCORER may be an alias.

    A setting for a scorer not in ``scorers`` is an error: it would silently do nothing.
    """
    selected = [split_name(entry)[0] for entry in scorers]
    settings: dict[str, dict[str, str]] = {}
    for text in assignments:
        target, sep, value = text.partition("=")
        scorer, dot, key = target.partition(".")
        if not sep or not dot or not scorer or not key:
            raise ValueError(f"--set expects SCORER.KEY=VALUE, got {text!r}")
        if scorer not in selected:
            raise ValueError(
                f"--set {text!r}: scorer '{scorer}' is not selected; "
                f"selected: {', '.join(selected)}"
            )
        settings.setdefault(scorer, {})[key] = value
    return settings


def build(entries: list[str], settings: dict[str, dict[str, Any]] | None = None) -> list[Scorer]:
    """Instantiate scorers from ``SCORER`` or ``ALIAS=SCORER`` entries, with settings keyed by
    alias. An alias lets one scorer run twice with different settings (e.g. CodeBERTScore with
    and without the intent) into distinct columns."""
    settings = settings or {}
    scorers = []
    for entry in entries:
        alias, name = split_name(entry)
        cls = get(name)
        try:
            scorer = cls(**settings.get(alias, {}))
        except ValueError as exc:
            if alias == name:
                raise
            raise ValueError(f"{exc} (the scorer {name} as {alias})") from None
        except Exception as exc:
            origin = third_party(cls)
            if origin is None:
                raise
            raise ValueError(f"the scorer {name} ({origin}) could not be made: {exc!r}") from exc
        scorer.alias = alias
        scorers.append(scorer)
    return scorers
