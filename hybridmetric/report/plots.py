"""The report's figures, drawn with matplotlib's object API (Agg canvas) and returned as PNG bytes.

No pyplot: figures are never registered with a GUI backend, so drawing is safe on headless
machines and in threads. Text from the data (metric, feature names) is shown literally: a ``$`` in
a name never starts mathtext.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hybridmetric.report.tables import LEVEL_TITLES, grading, label
from hybridmetric.signature import visible

DPI = 110
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
JITTER_SEED = 0  # the strip plots' horizontal jitter; it moves dots, never a number
MAX_LEVELS = 12  # most rating values the strip plots' mean line takes one by one


def literal(text: str) -> str:
    """``text`` as matplotlib shows it verbatim (dollar signs escaped, so no mathtext; see
    :func:`hybridmetric.signature.visible`)."""
    return visible(text, keep="\t\n").replace("$", r"\$")


def to_png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _interval(estimate: Any) -> tuple[float, float, float] | None:
    """``(value, lo, hi)`` of an estimate; None when it has no finite value."""
    if not isinstance(estimate, Mapping) or estimate.get("value") is None:
        return None
    value = float(estimate["value"])
    if not math.isfinite(value):
        return None
    ci = estimate.get("ci") or (value, value)
    lo, hi = (value if c is None else float(c) for c in ci)
    return value, lo, hi


def forest_plot(agreement: Mapping[str, Mapping[str, Mapping[str, Any]]],
                statistics: Sequence[str],
                ceiling: Mapping[str, Mapping[str, Any]] | None = None) -> bytes:
    """Correlations with their CIs: a panel per level, a row per metric, a colour per statistic.

    ``ceiling`` (``{level: {statistic: estimate}}``) is the human ceiling, drawn in its level's
    panel as a dashed line with its CI shaded, in the statistic's colour.
    """
    levels = list(agreement)
    metrics = list(dict.fromkeys(m for by_metric in agreement.values() for m in by_metric))
    colour = {s: COLOURS[i % len(COLOURS)] for i, s in enumerate(statistics)}
    height = 1.4 + 0.2 * len(metrics) * max(2, len(statistics))
    figure = Figure(figsize=(3.4 * len(levels) + 2.2, height), layout="constrained")
    axes = figure.subplots(1, len(levels), sharey=True, squeeze=False)[0]
    offsets = np.linspace(-0.32, 0.32, len(statistics)) if len(statistics) > 1 else np.zeros(1)
    drew_ceiling = False
    for axis, level in zip(axes, levels, strict=True):
        for row, metric in enumerate(metrics):
            for offset, stat in zip(offsets, statistics, strict=True):
                point = _interval(agreement[level].get(metric, {}).get(stat))
                if point is None:
                    continue
                value, lo, hi = point  # (a percentile interval need not hold its estimate)
                axis.plot([lo, hi], [row + offset] * 2, "|-", color=colour[stat],
                          markersize=5, linewidth=1.2)
                axis.plot(value, row + offset, "o", color=colour[stat], markersize=4)
        for stat, estimate in (ceiling or {}).get(level, {}).items():
            point = _interval(estimate)
            if point is None or stat not in colour:
                continue
            axis.axvspan(point[1], point[2], color=colour[stat], alpha=0.12, linewidth=0)
            axis.axvline(point[0], color=colour[stat], linestyle="--", linewidth=1.2)
            drew_ceiling = True
        axis.axvline(0, color="#444444", linewidth=0.8)
        axis.set_title(literal(LEVEL_TITLES.get(level, label(level)).split(" (")[0]), fontsize=10)
        axis.grid(axis="x", color="#dddddd", linewidth=0.6)
        axis.set_xlabel("correlation with the rating", fontsize=9)
    for row in range(1, len(metrics)):
        for axis in axes:
            axis.axhline(row - 0.5, color="#eeeeee", linewidth=0.6)
    axes[0].set_yticks(range(len(metrics)), [literal(m) for m in metrics])
    axes[0].set_ylim(len(metrics) - 0.5, -0.5)
    handles = [axes[0].plot([], [], "o", color=colour[s])[0] for s in statistics]
    names = [literal(label(s)) for s in statistics]
    if drew_ceiling:
        handles.append(axes[0].plot([], [], "--", color="#444444")[0])
        names.append("human ceiling (leave one rater out)")
    figure.legend(handles, names, loc="outside lower center", ncols=min(len(names), 6),
                  fontsize=8, frameon=False)
    return to_png(figure)


def rating_groups(ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group of each rating, x position of each group)`` for the strip plots' mean line.

    A rating scale with at most ``MAX_LEVELS`` distinct values is grouped by value; a finer one
    (e.g. means of several raters) by ``MAX_LEVELS`` equal-width bins, placed at their centres.
    """
    levels = np.unique(ratings)
    if len(levels) <= MAX_LEVELS:
        return np.searchsorted(levels, ratings), levels
    edges = np.linspace(levels[0], levels[-1], MAX_LEVELS + 1)
    group = np.clip(np.searchsorted(edges, ratings, side="right") - 1, 0, MAX_LEVELS - 1)
    return group, (edges[:-1] + edges[1:]) / 2


def strip_plots(frame: pd.DataFrame, target: str, names: Sequence[str]) -> bytes:
    """Each metric column against the human rating: jittered dots and the metric's mean per rating.

    Rows where the metric is not applicable (NaN) are left out and counted in the panel's title.
    """
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    figure = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
    rng = np.random.default_rng(JITTER_SEED)
    ratings = frame[target].to_numpy(dtype=float)
    levels = np.unique(ratings[np.isfinite(ratings)])
    width = 0.3 * float(np.min(np.diff(levels))) if len(levels) > 1 else 0.0
    for axis, name in zip(axes, names, strict=False):
        scores = frame[name].to_numpy(dtype=float)
        keep = np.isfinite(scores) & np.isfinite(ratings)
        x, y = ratings[keep], scores[keep]
        axis.scatter(x + rng.uniform(-width, width, size=len(x)), y, s=8,
                     alpha=float(np.clip(20 / np.sqrt(max(len(x), 1)), 0.15, 0.7)),
                     color=COLOURS[0], linewidths=0)
        if len(x):
            group, positions = rating_groups(x)
            present = np.unique(group)
            axis.plot(positions[present], [y[group == g].mean() for g in present], "o-",
                      color=COLOURS[3], markersize=4, linewidth=1.5)
        dropped = int((~keep).sum())
        title = f"{name}  (n={int(keep.sum())}" + (f", {dropped} n/a)" if dropped else ")")
        axis.set_title(literal(title), fontsize=9)
        axis.set_xlabel(literal(target), fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(color="#eeeeee", linewidth=0.6)
    for axis in axes[len(names):]:
        axis.set_visible(False)
    return to_png(figure)


def weights_plot(weights: Mapping[str, Mapping[str, Any]], ci: str) -> bytes:
    """The hybrid's weights with their CIs (``ci`` names them, e.g. ``95% CI``), a row each."""
    names = list(weights)
    figure = Figure(figsize=(6.0, 0.9 + 0.35 * len(names)), layout="constrained")
    axis = figure.subplots()
    for row, name in enumerate(names):
        point = _interval(weights[name])
        if point is None:
            continue
        value, lo, hi = point  # (a percentile interval need not hold its estimate)
        axis.plot([lo, hi], [row, row], "|-", color=COLOURS[0], markersize=7, linewidth=1.2)
        axis.plot(value, row, "s", color=COLOURS[0], markersize=5)
    axis.axvline(0, color="#444444", linewidth=0.8)
    axis.set_yticks(range(len(names)), [literal(n) for n in names])
    axis.set_ylim(len(names) - 0.5, -0.5)
    axis.set_xlabel(f"weight per training SD of the feature ({ci})")
    axis.grid(axis="x", color="#dddddd", linewidth=0.6)
    return to_png(figure)


def calibration_plot(table: Sequence[Mapping[str, Any]], scale: Sequence[float] | None) -> bytes:
    """Mean observed rating against mean predicted rating per bin; dot area grows with the bin."""
    predicted = np.array([row["predicted"] for row in table], dtype=float)
    observed = np.array([row["observed"] for row in table], dtype=float)
    counts = np.array([row["n"] for row in table], dtype=float)
    figure = Figure(figsize=(4.6, 4.2), layout="constrained")
    axis = figure.subplots()
    if scale is not None:
        lo, hi = float(scale[0]), float(scale[1])
    else:
        lo = float(np.nanmin(np.r_[predicted, observed]))
        hi = float(np.nanmax(np.r_[predicted, observed]))
    axis.plot([lo, hi], [lo, hi], "--", color="#888888", linewidth=1, label="perfect calibration")
    area = 20 + 180 * counts / max(float(counts.max()), 1.0)
    axis.scatter(predicted, observed, s=area, color=COLOURS[0], alpha=0.8, zorder=3)
    axis.plot(predicted, observed, "-", color=COLOURS[0], linewidth=1)
    margin = 0.04 * (hi - lo) or 0.5  # (a dot at the scale's end shows whole)
    axis.set_xlim(lo - margin, hi + margin)
    axis.set_ylim(lo - margin, hi + margin)
    axis.set_aspect("equal")
    axis.set_xlabel("mean predicted rating")
    axis.set_ylabel("mean observed rating")
    axis.legend(fontsize=8, loc="upper left", frameon=False)
    axis.grid(color="#eeeeee", linewidth=0.6)
    return to_png(figure)


def grade_bars(pass_value: Mapping[str, Any], target: str) -> bytes:
    """Grouped bars: the share of passing and of failing rows at each grade, with CIs."""
    grades = list(pass_value["grades"])
    figure = Figure(figsize=(1.2 + 0.9 * max(len(grades), 2), 3.4), layout="constrained")
    axis = figure.subplots()
    positions = np.arange(len(grades), dtype=float)
    for k, (group, name) in enumerate((("pass", "passes its tests"), ("fail", "fails its tests"))):
        block = pass_value[group]
        shares = {entry["grade"]: _interval(entry["share"]) for entry in block["distribution"]}
        points = [shares.get(g) or (0.0, 0.0, 0.0) for g in grades]
        values, lows, highs = np.array(points, dtype=float).T
        at = positions + (k - 0.5) * 0.4
        axis.bar(at, values, width=0.4, color=COLOURS[2 if group == "pass" else 3],
                 label=f"{name} (n={block['n']})")
        # each interval as it is: a percentile interval need not hold its estimate
        axis.errorbar(at, (lows + highs) / 2, yerr=(highs - lows) / 2, fmt="none",
                      ecolor="black", capsize=3, linewidth=1)
    axis.set_xticks(positions, [str(g) for g in grades],
                    rotation=30 if pass_value.get("grading") == "binned" else 0)
    axis.set_xlabel(literal(f"grade ({grading(pass_value, target)})"), fontsize=9)
    axis.set_ylabel("share of the group's rows", fontsize=9)
    axis.set_ylim(0, 1)
    axis.legend(fontsize=8, frameon=False)
    axis.grid(axis="y", color="#eeeeee", linewidth=0.6)
    return to_png(figure)
