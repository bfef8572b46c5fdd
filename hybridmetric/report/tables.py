"""The report's tables, built once from the results dict and the metric card.

The HTML and Markdown writers render the same :class:`Table` objects, so the two reports always
show the same numbers. Cells hold plain, unescaped text; each writer escapes it for its format.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hybridmetric.combine import cv_comparisons
from hybridmetric.schema import HYBRID_COLUMN
from hybridmetric.stats import largest_abs, shown_decimals

LEVEL_TITLES = {
    "item": "Item level (every row)",
    "within_task": "Within task (the candidates of each task compared with each other)",
    "system": "System level (mean per system)",
}
LEVEL_NOTES = {
    "system": "Statistics of the per-system means. The intervals resample tasks, the systems "
              "kept: how much the systems' order depends on which problems were drawn (an "
              "interval [1.000, 1.000]: every resample orders them alike), not how many systems "
              "were compared; a percentile interval need not hold its estimate. The permutation "
              "tests swap whole systems' means, so with S systems no p-value falls below 1/2^S: "
              "the two answer different questions, and can disagree.",
}
DASH = "—"
#: Decimals a number is shown to (more where its scale is small: :func:`scale_decimals`).
DECIMALS = 3


def within_task_note(settings: dict) -> str:
    """What the within-task table's statistics are, with the audit's tie threshold and its
    way with a metric constant on a task (its ``settings``)."""
    threshold = settings.get("tie_threshold") or 0
    ties = ("a tie only where two scores are equal: its script also ties scores less than 0.001 "
            "apart" if not threshold else
            f"a tie where two ratings, or two scores, differ by at most {threshold:g}: its script "
            "ties scores less than 0.001 apart")
    constant = ("counts 0 there, so that every metric is averaged over the same tasks"
                if settings.get("constant_within", "zero") == "zero" else
                "is left out of that metric's mean there (constant_within skip), so that metrics "
                "may be averaged over different tasks")
    return ("tau darr: pairs of candidates (rows) of the same task, two samples of one system "
            f"too, human ties dropped, pooled over tasks (CodeBERTScore's statistic, with {ties}); "
            "the other statistics: the mean over tasks of each task's value (a metric that scores "
            f"alike the rows of a task that the ratings score apart {constant}).")


@dataclass(frozen=True)
class Cell:
    """One table cell: its text and a style class (``good``, ``muted`` or empty)."""

    text: str
    style: str = ""


@dataclass
class Table:
    """A titled table with a header row and an optional note printed under it."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""


def fmt(value: Any, decimals: int = DECIMALS) -> str:
    """A number as report text: integers as they are, floats to ``decimals``, None a dash."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return DASH if math.isnan(value) else f"{value:.{decimals}f}"
    return str(value)


def fmt_p(value: Any, alpha: float | None = None) -> str:
    """A p-value: three decimals, or scientific notation below 0.001; with more decimals where
    three would show it on the other side of ``alpha`` (0.049995 is 0.049995, not 0.050)."""
    if value is None:
        return DASH
    if value < 0.001:
        return f"{value:.1e}"
    decimals = 3
    while (alpha is not None and decimals < 9
           and (float(f"{value:.{decimals}f}") < alpha) != (value < alpha)):
        decimals += 1
    return f"{value:.{decimals}f}"


def is_estimate(value: Any) -> bool:
    """Whether ``value`` is an estimate: a mapping with a ``value`` (and usually a ``ci``)."""
    return isinstance(value, Mapping) and "value" in value


def fmt_estimate(value: Any, decimals: int = DECIMALS) -> str:
    """``0.412 [0.380, 0.441]`` from ``{"value": .., "ci": [lo, hi]}``; a bare number as is."""
    if not is_estimate(value):
        return fmt(value, decimals)
    text = fmt(value["value"], decimals)
    ci = value.get("ci")
    if ci is not None:
        text += f" [{_bound(ci[0], decimals)}, {_bound(ci[1], decimals)}]"
    return text


#: A CI bound smaller in size than a millionth of the last decimal shown is rounding error (a
#: difference of equal sums taken in another order), shown as 0.
NOISE_DIGITS = 6


def _bound(value: Any, decimals: int) -> str:
    """A CI's bound: as :func:`fmt`, but one that rounds to 0 shows one significant digit
    (-0.0002, not -0.000: whether the interval holds 0 shows), unless it is rounding error
    (:data:`NOISE_DIGITS`: -3e-13 shown to 3 decimals is 0.000, not -0.0000000000003)."""
    if isinstance(value, float) and abs(value) < 10.0 ** -(decimals + NOISE_DIGITS):
        return fmt(0.0, decimals)
    text = fmt(value, decimals)
    if isinstance(value, float) and math.isfinite(value) and value != 0 and float(text) == 0:
        return f"{value:.{shown_decimals(value, 0)}f}"
    return text


def scale_decimals(scale: Sequence[float] | None, *observed: Any) -> int:
    """The decimals of numbers on a rating ``scale`` (its bounds; where it is None, the largest
    of the ``observed`` numbers or estimates stands for it): 3 on 0 to 4, 9 on 0 to 1e-6
    (:func:`~hybridmetric.stats.shown_decimals`)."""
    numbers = list(scale) if scale else []
    for value in () if scale else observed:
        numbers += [value["value"], *(value.get("ci") or ())] if is_estimate(value) else [value]
    return shown_decimals(largest_abs(np.array(numbers, dtype=float)), DECIMALS)  # (None: NaN)


def label(key: str) -> str:
    """A results key as a heading: ``kendall_b`` -> ``kendall b``."""
    return key.replace("_", " ")


def statistics_of(by_metric: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The statistics reported for any metric, in order of first appearance."""
    names: list[str] = []
    for stats in by_metric.values():
        names.extend(name for name in stats if name not in names)
    return names


def ci_name(results: Mapping[str, Any]) -> str:
    """``95% bootstrap CI`` from the results' confidence setting (no level when it is absent)."""
    confidence = (results.get("settings") or {}).get("confidence")
    return f"{100 * confidence:g}% bootstrap CI" if confidence is not None else "bootstrap CI"


def agreement_tables(results: Mapping[str, Any]) -> list[Table]:
    """One table per level: a row per metric, a column per statistic, cells ``value [CI]``.

    A CI that rests on fewer resamples than were drawn (the statistic was undefined in some) is
    listed in the table's note with its count; an estimate without any CI apart (none was
    computed, as for the Kendall taus of a table too large, or the statistic was undefined in
    every resample: the report's notes on what was left out say which).
    """
    resamples = (results.get("settings") or {}).get("n_resamples")
    tables = []
    for level, by_metric in results.get("agreement", {}).items():
        stats = statistics_of(by_metric)
        notes = [f"Cells: estimate [{ci_name(results)} over tasks].",
                 within_task_note(results.get("settings") or {}) if level == "within_task"
                 else LEVEL_NOTES.get(level, "")]
        table = Table(LEVEL_TITLES.get(level, label(level)), ["metric", *map(label, stats)])
        short, none, fewer = [], [], []
        for metric, values in by_metric.items():
            table.rows.append([Cell(metric)] + [Cell(fmt_estimate(values.get(s))) for s in stats])
            counted = [(label(s), values[s]["n_tasks"]) for s in stats
                       if is_estimate(values.get(s)) and "n_tasks" in values[s]
                       and values[s]["n_tasks"] < results.get("n_tasks", 0)]
            if counted:
                fewer.append(f"{metric}: " + ", ".join(f"{s} {n}" for s, n in counted))
            for s in stats:
                valid = values[s].get("n_valid", resamples) if is_estimate(values.get(s)) else None
                if resamples is None or valid is None or valid >= resamples:
                    continue
                if valid == 0:
                    none.append(f"{metric} {label(s)}")
                else:
                    short.append(f"{metric} {label(s)} ({valid} of {resamples})")
        if fewer:
            notes.append(f"Over fewer of the {results['n_tasks']} tasks (those where the statistic "
                         "is defined: two rows or more that the ratings score apart, and, where "
                         "the audit leaves a metric's constant tasks out, the metric not constant "
                         "there; tau_darr: those with two rows rated apart): "
                         + "; ".join(fewer) + ".")
        if short:
            notes.append("CIs from fewer resamples, where the statistic was undefined in the "
                         "others: " + "; ".join(short) + ".")
        if none:
            notes.append("No CI (not computed, or undefined in every resample; see the notes "
                         "on what was left out): " + "; ".join(none) + ".")
        table.note = " ".join(note for note in notes if note)
        tables.append(table)
    return tables


def _p_cell(value: Any, alpha: float) -> Cell:
    if value is None:
        return Cell(DASH, "muted")
    return Cell(fmt_p(value, alpha), "good" if value < alpha else "")


def comparison_table(comparisons: Sequence[Mapping[str, Any]], alpha: float) -> Table:
    """Every tested difference ``a - b``: both values, the paired bootstrap CI, the p-values."""
    table = Table(
        "Differences in agreement (a − b)",
        ["a", "b", "level", "statistic", "value a", "value b", "delta [95% CI]", "p Williams",
         "p Williams Holm", "p permutation", "p permutation Holm"],
        note=(f"One-sided tests of a > b; p-values of permutation tests are (c+1)/(n+1) over n "
              "random swaps, or c/n over all n swap patterns where they are no more; Holm "
              f"corrects across the metric family; highlighted where below {alpha}. {DASH}: the "
              "test does not apply to this statistic (Williams at item level where a task has "
              "several rows: it takes rows as independent), or has no value on these data (two "
              "metrics one up to a linear map, or ranking every row alike)."),
    )
    for row in comparisons:
        delta = {"value": row.get("delta"), "ci": row.get("ci")}
        table.rows.append([
            Cell(str(row["a"])), Cell(str(row["b"])), Cell(label(str(row["level"]))),
            Cell(label(str(row["statistic"]))), Cell(fmt(row.get("value_a"))),
            Cell(fmt(row.get("value_b"))), Cell(fmt_estimate(delta)),
            _p_cell(row.get("p_williams"), alpha), _p_cell(row.get("p_williams_holm"), alpha),
            _p_cell(row.get("p_permutation"), alpha), _p_cell(row.get("p_holm"), alpha),
        ])
    return table


def significance_matrix(comparisons: Sequence[Mapping[str, Any]], alpha: float) -> Table:
    """Pairs of metrics against (level, statistic): cell ``delta (Holm p)``, coloured.

    Green: ``a`` agrees significantly better than ``b`` after Holm's correction; grey: not
    (the tests are one-sided, H1 a > b: a metric that agrees better than ``a`` is grey, with a
    negative delta, whose own CI is in the differences table).
    """
    firsts = list(dict.fromkeys(str(row["a"]) for row in comparisons))
    pairs = list(dict.fromkeys((str(row["a"]), str(row["b"])) for row in comparisons))
    tests = list(dict.fromkeys((str(row["level"]), str(row["statistic"])) for row in comparisons))
    cells = {(str(r["a"]), str(r["b"]), str(r["level"]), str(r["statistic"])): r
             for r in comparisons}
    one = len(firsts) == 1
    table = Table(
        f"Significance: {firsts[0]} against each metric" if one else "Significance matrix",
        ["metric b" if one else "a − b", *(f"{label(lv)}: {label(st)}" for lv, st in tests)],
        note=(f"Cells: a − b (Holm-corrected one-sided permutation p, H1: a > b). Green: a "
              f"significantly better (Holm p < {alpha}); grey: not significantly better (a "
              "negative delta: b agreed better, which the differences table's CI tells); "
              "·: not tested."),
    )
    for a, b in pairs:
        line = [Cell(b if one else f"{a} − {b}")]
        for level, statistic in tests:
            row = cells.get((a, b, level, statistic))
            if row is None:
                line.append(Cell("·", "muted"))
                continue
            p, delta = row.get("p_holm"), row.get("delta")
            good = p is not None and p < alpha and delta is not None and delta > 0
            style = "good" if good else "muted"
            line.append(Cell(f"{fmt(delta)} ({fmt_p(p, alpha)})", style))
        table.rows.append(line)
    return table


#: The most raters the table of each rater against the others lists (a crowd study has hundreds).
MAX_RATERS_SHOWN = 40


def ceiling_tables(ceiling: Mapping[str, Any]) -> list[Table]:
    """The inter-rater reliability, the leave-one-rater-out ceiling, and each rater against the
    mean of the others."""
    summary = {k: v for k, v in ceiling.items() if k not in ("leave_one_rater_out", "per_rater")}
    tables = [key_value_table("Inter-rater reliability", summary)]
    loo = ceiling.get("leave_one_rater_out") or {}
    if loo:
        table = Table("Ceiling: a rater against the mean of the other raters",
                      ["level", "statistic", "estimate [95% CI]"],
                      note="Pooled over raters; CIs resample tasks (none where not computed).")
        for level, by_stat in loo.items():
            for stat, estimate in by_stat.items():
                table.rows.append([Cell(label(level)), Cell(label(stat)),
                                   Cell(fmt_estimate(estimate))])
        tables.append(table)
    per_rater = ceiling.get("per_rater") or {}
    if per_rater:
        stats = statistics_of(per_rater)
        shown = sorted(per_rater.items(), key=lambda item: (-(item[1].get("n") or 0),
                                                            natural(item[0])))[:MAX_RATERS_SHOWN]
        notes = []
        if len(per_rater) > len(shown):
            notes.append(f"The {len(shown)} raters with the most shared rows of "
                         f"{len(per_rater)}; every rater's are in results.json.")
        if any(values.get(s) is None for _, values in shown for s in stats):
            notes.append(f"{DASH}: not defined (fewer than 3 rows shared with another rater, "
                         "or the rater's grades, or the others' means on their rows, do not "
                         "vary).")
        table = Table("Each rater against the mean of the others", ["rater", *map(label, stats)],
                      note=" ".join(notes))
        for rater, values in sorted(shown, key=lambda item: natural(item[0])):
            table.rows.append([Cell(str(rater))] + [Cell(fmt(values.get(s))) for s in stats])
        tables.append(table)
    return tables


def natural(name: Any) -> list[Any]:
    """A sort key that puts ``grader2`` before ``grader10``: digit runs compared as numbers."""
    return [int(part) if k % 2 else part for k, part in enumerate(re.split(r"(\d+)", str(name)))]


def flatten(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Leaves of a nested mapping as ``(path, leaf)``; an estimate dict counts as one leaf."""
    if is_estimate(node) or not isinstance(node, Mapping):
        return [(prefix, node)]
    leaves = []
    for key, child in node.items():
        leaves.extend(flatten(child, f"{prefix} / {label(str(key))}" if prefix else label(key)))
    return leaves


def key_value_table(title: str, node: Mapping[str, Any], note: str = "",
                    exact: bool = False, decimals: int = DECIMALS) -> Table:
    """A two-column table of a nested mapping's leaves (lists are shown inline).

    ``exact`` shows numbers as they are stored (for settings), not rounded to ``decimals``.
    """
    def show(value: Any) -> str:
        if exact and not (isinstance(value, bool) or value is None):
            return str(value)
        return fmt(value, decimals)

    table = Table(title, ["quantity", "value"], note=note)
    for path, leaf in flatten(node):
        if isinstance(leaf, list):
            text = ", ".join(show(item) if not isinstance(item, list | Mapping)
                             else json.dumps(item) for item in leaf)
        elif is_estimate(leaf):
            text = fmt_estimate(leaf, decimals)
        else:
            text = show(leaf)
        table.rows.append([Cell(path), Cell(text)])
    return table


def weights_table(card: Mapping[str, Any], ci: str) -> Table:
    """The hybrid's features: weights with CIs (per training SD and per raw unit, to the decimals
    of the card's scale), feature stats."""
    decimals = scale_decimals(card.get("scale"))
    features = {f["name"]: f for f in card.get("features", [])}
    units = card.get("weights_units") or "units of the card's model"
    table = Table("Weights", ["feature", f"weight per SD [{ci}]", f"weight per unit [{ci}]",
                              "training mean", "training sd"],
                  note=f"Weights: {units}.")
    for name, weight in card["weights"].items():
        feature = features.get(name, {})
        per_unit = {"value": weight.get("per_unit"), "ci": weight.get("per_unit_ci")}
        table.rows.append([Cell(name), Cell(fmt_estimate(weight, decimals)),
                           Cell(fmt_estimate(per_unit, decimals)),
                           Cell(fmt(feature.get("mean"))), Cell(fmt(feature.get("std")))])
    return table


def calibration_table(calibration: Mapping[str, Any], decimals: int = DECIMALS) -> Table:
    """The calibration bins: predicted against observed mean rating."""
    table = Table(f"Calibration ({calibration.get('method', 'unnamed method')})",
                  ["bin", "n", "mean predicted", "mean observed"])
    for row in calibration["table"]:
        lo, hi = fmt(row["lo"], decimals), fmt(row["hi"], decimals)
        table.rows.append([Cell(f"[{lo}, {hi}]"), Cell(fmt(row["n"])),
                           Cell(fmt(row["predicted"], decimals)),
                           Cell(fmt(row["observed"], decimals))])
    return table


def cv_comparison_table(cv: Mapping[str, Any], alpha: float) -> Table:
    """The hybrid against the best single feature on held-out tasks, by each statistic (a card
    of before: Kendall's alone, untested)."""
    comparisons = cv_comparisons(cv)
    table = Table("Hybrid against the best single feature (held out)",
                  ["statistic", "best feature", "its mean", "hybrid's mean", "difference (sd)",
                   "folds hybrid higher", "p"],
                  note=f"Means over the folds where both are defined. p: one-sided, that the "
                       "hybrid's mean is higher, by the corrected resampled t-test (Nadeau & "
                       "Bengio 2003; Bouckaert & Frank 2004), as the folds share training rows "
                       f"(a card fitted before it has none); highlighted where below {alpha}. "
                       "Kendall's tau b leaves the pairs a metric ties out of its denominator, "
                       "so a feature of few values (pass) is judged on the pairs it sets apart; "
                       "Pearson's r weighs every row.")
    for name, c in comparisons.items():
        if c.get("gain") is None:
            table.rows.append([Cell(label(name))] + [Cell(DASH, "muted")] * 6)
            continue
        table.rows.append([
            Cell(label(name)), Cell(str(c["best_feature"])), Cell(fmt(c["best_feature_value"])),
            Cell(fmt(c["hybrid_value"])),
            Cell(f"{c['gain']:+.{DECIMALS}f} ({fmt(c.get('gain_sd'))})"),
            Cell(f"{c['wins']} of {c['n_folds']}"), _p_cell(c.get("p"), alpha)])
    return table


def cv_table(cv: Mapping[str, Any]) -> Table:
    """Held-out agreement of the hybrid, of each feature alone and of Dibia et al.'s COMBINED."""
    entries: list[tuple[str, Mapping[str, Any]]] = [("hybrid", cv.get("hybrid", {}))]
    entries.extend((name, stats) for name, stats in cv.get("features", {}).items())
    dibia = cv.get("dibia_combined")
    if dibia is not None:
        entries.append(("Dibia et al. COMBINED", dibia))
    stats = [s for s in statistics_of(dict(entries))
             if any(isinstance(values.get(s), Mapping) for _, values in entries)]
    note = (f"Cells: mean ± sd over {fmt(cv.get('n_folds_run'))} held-out folds "
            f"({fmt(cv.get('folds'))} folds × {fmt(cv.get('repeats'))} repeats, grouped by "
            f"{cv.get('grouped_by', 'task')}).")
    table = Table("Cross-validated agreement", ["model", *map(label, stats)], note=note)
    for name, values in entries:
        if "skipped" in values:
            table.rows.append([Cell(name)] + [Cell(DASH, "muted")] * len(stats))
            table.note += f" {name} skipped: {str(values['skipped']).rstrip('.')}."
            continue
        line = [Cell(name)]
        for stat in stats:
            value = values.get(stat) or {}
            line.append(Cell(f"{fmt(value.get('mean'))} ± {fmt(value.get('sd'))}"))
        table.rows.append(line)
    return table


def by_system_table(results: Mapping[str, Any]) -> Table:
    """Per system: rows, tasks, the mean target with its CI, and the mean of each metric (the
    target and the hybrid to the decimals of the rating scale)."""
    by_system = results["by_system"]
    metrics = statistics_of({s: v.get("metrics", {}) for s, v in by_system.items()})
    target = str(results.get("target", "target"))
    table = Table("Rows, tasks and means per system", ["system", "rows", "tasks",
                                                      f"mean {target} [CI]",
                                *(f"mean {m}" for m in metrics)],
                  note=f"CI: {ci_name(results)} over tasks; metric means without CIs.")
    rating = scale_decimals((results.get("settings") or {}).get("scale"),
                            *(v.get("mean") for v in by_system.values()))
    decimals = {m: rating if m == HYBRID_COLUMN else DECIMALS for m in metrics}
    for system, values in by_system.items():
        means = values.get("metrics", {})
        table.rows.append([Cell(str(system)), Cell(fmt(values.get("n"))),
                           Cell(fmt(values.get("n_tasks"))),
                           Cell(fmt_estimate(values.get("mean"), rating))]
                          + [Cell(fmt(means.get(m), decimals[m])) for m in metrics])
    return table


def grading(pass_value: Mapping[str, Any], target: str) -> str:
    """How the pass/fail section's grades were made from ``target``: rounded, or binned."""
    if pass_value.get("grading") == "binned":
        return f"{target} in bins of equal width"
    return f"{target} rounded half up"


def pass_value_tables(results: Mapping[str, Any]) -> list[Table]:
    """Passing against failing code: means and useful shares, then the grade distribution."""
    value = results["pass_value"]
    target = str(results.get("target", "target"))
    settings = results.get("settings") or {}
    threshold = settings.get("useful_threshold")
    decimals = scale_decimals(settings.get("scale"), threshold,
                              *(value[group].get("mean") for group in ("pass", "fail")))
    useful = (f"share {target} ≥ {fmt(threshold, decimals)}" if threshold is not None
              else "useful share")
    ci = ci_name(results)
    summary = Table("Ratings of passing and failing code",
                    ["code", "rows", "tasks", f"mean {target} [CI]", f"{useful} [CI]"],
                    note=f"CI: {ci} over tasks. Difference: passing minus failing, paired over "
                         f"the same task resamples. Audited rows without tests (n/a): "
                         f"{fmt(value.get('n_missing'))}, left out.")
    for group in ("pass", "fail"):
        block = value[group]
        table_row = [Cell("passes its tests" if group == "pass" else "fails its tests"),
                     Cell(fmt(block.get("n"))), Cell(fmt(block.get("n_tasks"))),
                     Cell(fmt_estimate(block.get("mean"), decimals)),
                     Cell(fmt_estimate(block.get("useful_share")))]
        summary.rows.append(table_row)
    difference = value.get("difference", {})
    summary.rows.append([Cell("difference (pass − fail)"), Cell(DASH, "muted"),
                         Cell(DASH, "muted"), Cell(fmt_estimate(difference.get("mean"), decimals)),
                         Cell(fmt_estimate(difference.get("useful_share")))])
    distribution = Table(f"Distribution of the grade ({grading(value, target)})",
                         ["grade", "pass: rows", "pass: share [CI]", "fail: rows",
                          "fail: share [CI]"],
                         note=f"Share of each group's rows with that grade; CI: {ci} over tasks.")
    by_grade = {group: {entry["grade"]: entry for entry in value[group]["distribution"]}
                for group in ("pass", "fail")}
    for grade in value.get("grades", []):
        line = [Cell(fmt(grade))]
        for group in ("pass", "fail"):
            entry = by_grade[group].get(grade, {})
            line += [Cell(fmt(entry.get("n"))), Cell(fmt_estimate(entry.get("share")))]
        distribution.rows.append(line)
    return [summary, distribution]
