"""The audit report: ``report.html``, ``report.md`` and ``results.json`` in one folder.

``results.json`` holds every number the two reports show: the audit's results dict as given,
plus the metric card under ``"card"``, the scorers' signatures under ``"scorers"`` and where
``score.hybrid`` came from under ``"hybrid_source"``, when given. Files are written atomically.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hybridmetric.io import atomic_path
from hybridmetric.report import document, html, markdown

__all__ = ["write_report"]


def check_json(value: Any, where: str = "results") -> None:
    """Fail, naming the place, unless ``value`` is strict JSON (no NaN/inf, no foreign types)."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string; JSON keys are strings")
            check_json(child, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            check_json(child, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} is {value}; results.json is strict JSON, so an undefined "
                         "statistic must be None (null), not NaN or infinity")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{where} is a {type(value).__name__}, which JSON cannot hold; convert "
                         "it to a plain Python number, string, list or dict")


def _merged(results: Mapping[str, Any], card: Mapping[str, Any] | None,
            scorers: Mapping[str, str] | None = None,
            hybrid: str | None = None) -> dict[str, Any]:
    for key in ("target", "signature"):
        if key not in results:
            raise ValueError(f"the results dict has no '{key}'; pass the dict the audit returned")
    merged = dict(results)
    if card is not None and not isinstance(card, Mapping):
        raise TypeError(f"card must be the metric card's dict (MetricCard.data, or the parsed "
                        f"CARD.json), got {type(card).__name__}")
    if card is not None:
        if "card" in results and results["card"] != card:
            raise ValueError("the results already hold a different metric card; pass card=None "
                             "to report the card the results hold")
        merged["card"] = dict(card)
    if scorers is not None:
        merged["scorers"] = dict(scorers)
    if hybrid is not None:
        merged["hybrid_source"] = hybrid
    check_json(merged)
    return merged


def write_report(results: Mapping[str, Any], frame: pd.DataFrame, out_dir: str | os.PathLike,
                 card: Mapping[str, Any] | None = None, scorers: Mapping[str, str] | None = None,
                 hybrid: str | None = None) -> dict[str, Path]:
    """Write ``report.html``, ``report.md`` and ``results.json`` to ``out_dir``.

    ``results`` is the audit's results dict, ``frame`` the scored table it was computed on (for
    the strip plots), ``card`` the fitted hybrid's metric card, if any (a card already inside
    ``results["card"]`` is used when ``card`` is None), ``scorers`` the signature of each
    scorer that made the table's scores (its sidecar's, by alias), ``hybrid`` where the
    table's ``score.hybrid`` came from. Returns the paths keyed ``html``, ``markdown`` and
    ``json``.
    """
    merged = _merged(results, card, scorers, hybrid)
    sections = document.build(merged, frame, merged.get("card"))
    title = f"Metric–human agreement audit: {merged['target']}"
    headline = document.headline(merged)
    out = Path(out_dir)
    paths = {"html": out / "report.html", "markdown": out / "report.md",
             "json": out / "results.json"}
    texts = {
        "html": html.render(title, headline, sections, merged["signature"]),
        "markdown": markdown.render(title, headline, sections, merged["signature"]),
        "json": json.dumps(merged, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
    }
    for kind, path in paths.items():
        with atomic_path(path) as temporary:
            temporary.write_text(texts[kind], encoding="utf-8")
    return paths
