"""The metric-human agreement audit: every number of the report, as one JSON-serialisable dict.

``audit(frame)`` measures how well each ``score.*`` column agrees with the human rating at three
levels, with bootstrap CIs that resample tasks; tests whether one metric (the hybrid, a named one,
or the best) agrees better than each other metric; and measures the human ceiling from per-rater
ratings. Statistics live in :mod:`hybridmetric.stats`.

Levels:

- ``item``: all rows pooled.
- ``within_task``: rows of the same task only. ``tau_darr`` is CodeBERTScore's Table 1 tau (pairs of
  rows for the same problem, human ties dropped, metric ties counted, pooled over tasks: there
  one row a system, here two samples of one system are a pair too), a
  tie being equal scores (its script also ties scores less than 0.001 apart, a threshold tied to
  its metrics' scale; ``stats.tau_darr`` takes it where its Table 1 is reproduced);
  ``pairwise_accuracy`` (acc23) is the mean over tasks of the per-task accuracy; ``pearson``,
  ``spearman``, ``kendall_tau_b``, ``kendall_tau_c`` are the mean over tasks of the per-task value,
  tasks with a constant side left out (ICE-Score's "example level").
- ``system``: the correlation of the per-system means (needs a ``system`` column).

Schema of the returned dict (``Estimate`` = ``{"value": float|None, "ci": [lo, hi]|None,
"n_valid": int}``: the point estimate, the percentile bootstrap CI over tasks, and how many
resamples gave a defined value; ``None`` stands for an undefined statistic)::

    {
      "signature": str,                  # hybridmetric.signature string of this audit
      "target": str,                     # the human column, e.g. "rating"
      "n_rows": int, "n_tasks": int, "n_systems": int|None,
      "n_dropped_rows": int,             # rows left out for a missing value (missing="drop-rows")
      "dropped": {"by_column": {column: int}, "n_tasks": int},  # (only where rows were left
                                         # out: the rows each column lacked, the tasks gone whole)
      "where": [str, ...],               # the FIELD=VALUE conditions that chose the rows ([]: all)
      "n_table_rows": int,               # rows of the table, before those and missing values
      "metrics": [str, ...],             # audited columns, e.g. "score.chrf"
      "focus": str,                      # the metric compared against every other one
      "focus_rule": "named"|"hybrid"|"best item pearson",
      "agreement": {
        "item":        {metric: {"pearson"|"spearman"|"kendall_tau_b"|"kendall_tau_c"
                                 |"pairwise_accuracy"|"pairwise_accuracy_tc": Estimate}},
                       # over stats.MAX_PAIR_ROWS rows: no pairwise accuracy, Kendall without CI
        "within_task": {metric: {"tau_darr"|"pairwise_accuracy"|"pairwise_accuracy_tc"|"pearson"
                                 |"spearman"|"kendall_tau_b"|"kendall_tau_c": Estimate}},
        "system":      {metric: {"pearson"|"spearman"|"kendall_tau_b"|"kendall_tau_c"
                                 |"pairwise_accuracy": Estimate}}      # absent without systems
      },                                 # "*_tc" estimates also hold "epsilon": the calibrated
                                         # metric tie threshold (Deutsch et al. 2023); those
                                         # within task "n_tasks": the tasks counted (a mean over
                                         # those where the statistic is defined, a metric alike
                                         # on rows rated apart counted 0 with constant_within
                                         # "zero"; tau_darr: with two rows rated apart)
      "comparisons": [{
          "a": str, "b": str, "level": str, "statistic": str,
          "value_a": float|None, "value_b": float|None,
          "delta": float|None,           # value_a - value_b
          "ci": [lo, hi]|None,           # paired bootstrap CI of delta (same task resamples)
          "p_williams": float|None,      # one-sided, H1: a > b; None where it does not apply
                                         # (item level: where a task has several rows)
          "p_permutation": float|None,   # PERM-BOTH, one-sided, (c+1)/(n+1), tasks (systems)
                                         # swapped whole; None: constant
          "p_holm": float|None,          # Holm over the family (same level and statistic)
          "p_williams_holm": float|None}, ...],
      "ceiling": {                       # or {"reason": str}: no per-rater ratings, a
                                         # target other than "rating", which they grade, or
                                         # fewer than 3 rows rated by two or more raters
          "n_raters": int, "n_ratings": int, "n_rows_multi_rated": int,
          "krippendorff_alpha": {"interval": float, "ordinal": float},
          "mean_rating": {               # or {"reason": str}: the target is no mean of grades
              "method": str,             # two-way (leniency fitted), else Spearman-Brown of
                                         # the interval alpha
              "raters_per_row": float,   # (harmonic mean)
              "reliability": float,
              "perfect_metric_pearson": float},  # its square root: the item-level Pearson of
                                         # a metric that matched the raters' shared judgement
          "leave_one_rater_out": {       # each rating against the mean of the other raters'
              "item": {"pearson": Estimate, "spearman": Estimate,
                       "kendall_tau_b": Estimate},                  # this one without CI
              "within_task": {"tau_darr": Estimate}},
          "per_rater": {rater: {"n": int, "pearson": float|None, "spearman": float|None}}},
                                         # (every rater; n: rows shared with another rater,
                                         # no correlation under 3)
      "by_system": {                     # absent without a 'system' column
          system: {"n": int, "n_tasks": int,
                   "mean": Estimate,     # mean target of the system's rows, CI over tasks
                   "metrics": {metric: float|None}}},   # mean of each metric on those rows
      "pass_value": {                    # absent without a 'score.pass' column (1.0 / 0.0)
          "n_missing": int,              # rows with NaN pass (no tests), left out below
          "grades": [int|str, ...],      # the grades: the scale's integers, or (a scale of
                                         # more than 12 integers, or fewer than 3 of which
                                         # some rating is none) 10 bins of
                                         # equal width named by their intervals, "[20, 30)"
                                         # (without a scale: over the observed range)
          "grading": "rounded"|"binned", # which of the two
          "pass"|"fail": {
              "n": int, "n_tasks": int,
              "mean": Estimate,          # mean target
              "useful_share": Estimate,  # share with target >= settings.useful_threshold
                                         # (default: the middle of the scale)
              "distribution": [{"grade": int|str, "n": int, "share": Estimate}, ...]},
                                         # grade: the target rounded half up, or its bin
          "difference": {"mean": Estimate, "useful_share": Estimate}},  # pass - fail, paired
                                         # over the same task resamples
      "counts": {"within_task_pairs": int, "human_tied_pairs": int, "tasks_with_pairs": int},
      "skipped": [str, ...],             # levels or comparisons left out, and why
      "notes": [str, ...],               # what limits the numbers computed: few tasks or
                                         # systems, intervals on part of the resamples,
                                         # tests that cannot reach significance, constant
                                         # metrics
      "settings": {"seed", "n_resamples", "n_permutations", "confidence", "alpha",
                   "bootstrap_unit", "ci_method", "permutation", "williams", "holm_family",
                   "tie_threshold", "missing", "comparisons", "useful_threshold", "scale",
                   "constant_within"}
    }

``pass_value`` answers Dibia et al. (2022, arXiv 2210.16494), who found that programmers value
code that fails its unit tests: how the ratings of failing code compare with those of passing
code. Every share and mean is a ratio of task sums, so its bootstrap resamples tasks like the rest
of the audit (a resample without failing rows leaves that resample undefined, counted in
``n_valid``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hybridmetric import stats
from hybridmetric.schema import (
    HYBRID_COLUMN,
    PASS_COLUMN,
    SCORE_PREFIX,
    check_grades_on_scale,
    check_on_scale,
    checked_ratings,
    missing_message,
    missing_rows,
    numbers,
    renumbered,
    row_label,
    rows_label,
    score_column,
    select_rows,
    where_conditions,
    where_signature,
)
from hybridmetric.signature import environment, signature

#: Bump when a change alters the numbers (3: system-level permutations swap whole systems; the
#: Williams test of two metrics one up to a linear map is NaN; 4: wide scales' grades binned;
#: 5: a level whose ratings never differ, within any task or between the systems' means, is
#: left out; 6: means rounded to digits of the values averaged, not to 11 decimals at least,
#: so a scale as small as 0 to 1e-6 keeps its digits; 7: the human ceiling needs 3 rows rated
#: twice, not 3 rater-vs-rest pairs, which two rows of two raters made, mirror images; 8:
#: permutations at item and within-task level swap whole tasks, no Williams test at item level
#: where tasks have several rows, and a metric constant in a task the ratings score apart
#: counts 0 in within-task correlations; 9: the ceiling gives the mean rating's reliability).
AUDIT_VERSION = "9"
ITEM_STATISTICS = ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c", "pairwise_accuracy",
                   "pairwise_accuracy_tc")
WITHIN_STATISTICS = ("tau_darr", "pairwise_accuracy", "pairwise_accuracy_tc", "pearson",
                     "spearman", "kendall_tau_b", "kendall_tau_c")
SYSTEM_STATISTICS = ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c", "pairwise_accuracy")
#: ("item", "spearman") is supported too; it is left out by default as the costliest test.
DEFAULT_COMPARISONS = (("item", "pearson"), ("within_task", "tau_darr"), ("system", "pearson"))
HYBRID, PASS = HYBRID_COLUMN, PASS_COLUMN


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _estimate(value: float, resampled: np.ndarray, confidence: float, **extra: Any
              ) -> dict[str, Any]:
    lo, hi = stats.percentile_ci(resampled, confidence)
    ci = [lo, hi] if math.isfinite(lo) else None
    return {"value": _number(value), "ci": ci, "n_valid": int(np.isfinite(resampled).sum()),
            **extra}


def finite_values(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Which of ``columns`` hold a finite number in each row (rows x columns, bool): a row
    without one in every column the audit needs is left out by ``missing="drop-rows"``."""
    return np.isfinite(np.column_stack([numbers(frame, c) for c in columns]))


def _reliability(frame: pd.DataFrame) -> tuple[list[str], np.ndarray] | None:
    """Raters and the raters x rows matrix of the ``ratings`` column (nan: not graded), or None
    when absent; a ValueError naming the row where a cell is not rater -> grade
    (:func:`schema.checked_ratings`)."""
    if "ratings" not in frame.columns:
        return None
    cells = checked_ratings(frame)["ratings"].tolist()
    raters = sorted({r for cell in cells if isinstance(cell, Mapping) for r in cell})
    if not raters:
        return None
    index = {r: k for k, r in enumerate(raters)}
    data = np.full((len(raters), len(cells)), np.nan)
    for row, cell in enumerate(cells):
        if isinstance(cell, Mapping):
            for rater, value in cell.items():
                data[index[rater], row] = float(value)
    return raters, data


def systems_of(frame: pd.DataFrame) -> np.ndarray | None:
    """Each row's system, as text; None where the table names none (no ``system`` column, or
    one empty on every row). ValueError where only some rows name theirs: the system level
    and the per-system table would group the others under no system."""
    if "system" not in frame.columns:
        return None
    absent = np.flatnonzero(frame["system"].isna().to_numpy())
    if absent.size == len(frame):
        return None
    if absent.size:
        raise ValueError(f"'system' is missing in {absent.size} of {len(frame)} rows "
                         f"({rows_label(frame, absent)}): give every row its system, or none")
    return frame["system"].astype(str).to_numpy(dtype=object)


class _Data:
    """The arrays the audit needs, coded once."""

    def __init__(self, frame: pd.DataFrame, metrics: Sequence[str], target: str):
        self.human = numbers(frame, target)  # (finite: see audit's missing values)
        self.scores = {m: numbers(frame, m) for m in metrics}
        if "task_id" not in frame.columns:
            raise ValueError("the table has no 'task_id' column; the audit groups rows by task")
        self.tasks = frame["task_id"].astype(str).to_numpy()
        self.task_labels, self.task_codes = stats.group_codes(self.tasks)
        self.systems = systems_of(frame)


def _item(data: _Data, metric: np.ndarray, counts: np.ndarray, confidence: float
          ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    h, codes = data.human, data.task_codes
    resampled = {name: stats.bootstrap_correlation(name, h, metric, codes, counts)
                 for name in ("pearson", "spearman")}
    values = {name: stats.POINT_STATISTICS[name](metric, h)
              for name in ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c")}
    if h.size > stats.MAX_PAIR_ROWS:  # the pair statistics' bootstrap is O(rows^2)
        out = {name: _estimate(values[name], resampled[name], confidence)
               for name in ("pearson", "spearman")}
        for name in ("kendall_tau_b", "kendall_tau_c"):
            out[name] = {"value": _number(values[name]), "ci": None, "n_valid": 0}
        return out, resampled
    accuracy, epsilon, accuracy_tc = stats.accuracy_and_calibration(h, metric)
    resampled.update(stats.bootstrap_pair_statistics(h, metric, codes, counts, epsilon))
    values["pairwise_accuracy"] = accuracy
    values["pairwise_accuracy_tc"] = accuracy_tc
    out = {name: _estimate(values[name], resampled[name], confidence) for name in ITEM_STATISTICS}
    out["pairwise_accuracy_tc"]["epsilon"] = epsilon
    return out, resampled


def _within(data: _Data, metric: np.ndarray, counts: np.ndarray, confidence: float,
            threshold: float, constant_as_zero: bool
            ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    h, tasks = data.human, data.tasks
    cdt = stats.darr_counts(h, metric, tasks, threshold)
    total = cdt.sum(axis=0)
    values = {"tau_darr": (total[0] - total[1]) / total.sum() if total.sum() else math.nan}
    resampled = {"tau_darr": stats.bootstrap_darr(cdt, counts)}
    tasks_counted = {"tau_darr": int(np.count_nonzero(cdt.sum(axis=1)))}  # (rated apart)
    epsilon, _ = stats.tie_calibration(h, metric, tasks)
    for name, eps in (("pairwise_accuracy", 0.0), ("pairwise_accuracy_tc", epsilon),
                      ("pearson", 0.0), ("spearman", 0.0), ("kendall_tau_b", 0.0),
                      ("kendall_tau_c", 0.0)):
        base = "pairwise_accuracy" if name == "pairwise_accuracy_tc" else name
        per_task = stats.per_group(base, h, metric, tasks, eps)
        if constant_as_zero:
            per_task = stats.constant_metric_as_zero(per_task, h, metric, tasks)
        defined = np.isfinite(per_task)
        values[name] = float(per_task[defined].mean()) if defined.any() else math.nan
        tasks_counted[name] = int(defined.sum())
        resampled[name] = stats.bootstrap_group_mean(per_task, counts)
    out = {name: _estimate(values[name], resampled[name], confidence) for name in WITHIN_STATISTICS}
    out["pairwise_accuracy_tc"]["epsilon"] = epsilon
    for name, n in tasks_counted.items():
        out[name]["n_tasks"] = n
    return out, resampled


def _rowwise_defined(statistic: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.full(x.shape[0], np.nan)
    ok = np.all(np.isfinite(x), axis=1) & np.all(np.isfinite(y), axis=1)
    if ok.any():
        out[ok] = stats.rowwise(statistic, x[ok], y[ok])
    return out


def _system(data: _Data, metric: np.ndarray, counts: np.ndarray, confidence: float,
            human_boot: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    assert data.systems is not None
    _, system_codes = stats.group_codes(data.systems)
    means = stats.system_means(metric, data.systems)[None, :]
    human_means = stats.system_means(data.human, data.systems)[None, :]
    boot = stats.bootstrap_system_means(metric, data.task_codes, system_codes, counts)
    out, resampled = {}, {}
    for name in SYSTEM_STATISTICS:
        resampled[name] = _rowwise_defined(name, boot, human_boot)
        out[name] = _estimate(_rowwise_defined(name, means, human_means)[0], resampled[name],
                              confidence)
    return out, resampled


def _constant(values: np.ndarray, source: np.ndarray | None = None) -> bool:
    """Whether ``values`` are one value but for rounding (means of equal sums in another order
    differ by ~1e-16 of the sums' terms, which z-scoring would blow up to +-1): relative to the
    largest of them, or of ``source``, the values they are means of (means that cancel to ~0
    have their terms' rounding). Relative, not absolute: ratings or a metric of 1e-15 vary."""
    size = float(np.max(np.abs(values if source is None else np.r_[values, source])))
    with np.errstate(over="ignore"):  # (values of +-1e308: a spread of inf, not constant)
        return bool(np.ptp(values) <= 1e-12 * size)


def _williams(level: str, statistic: str, data: _Data, a: str, b: str) -> float | None:
    if statistic not in ("pearson", "spearman") or level == "within_task":
        return None
    h, xa, xb = data.human, data.scores[a], data.scores[b]
    if level == "system":
        assert data.systems is not None
        h, xa, xb = (stats.system_means(v, data.systems) for v in (h, xa, xb))
    if h.size <= 3:  # (the test's t has n - 3 degrees of freedom)
        return None
    function = stats.POINT_STATISTICS[statistic]
    r = (function(xa, h), function(xb, h), function(xa, xb))
    if not all(math.isfinite(v) for v in r):
        return None
    return _number(stats.williams_test(r[0], r[1], r[2], h.size))


#: Below this many tasks, the audit says its intervals are rough (:func:`_resampling_notes`).
FEW_TASKS = 20
#: Intervals on fewer than this share of the resamples are pointed out (:func:`_resampling_notes`).
VALID_SHARE = 0.9


def _resampling_notes(agreement: Mapping[str, Mapping[str, Mapping[str, Any]]], n_tasks: int,
                      n_resamples: int) -> list[str]:
    """What limits the bootstrap intervals: few tasks to resample (a percentile interval over
    few groups is too narrow, and over 2 or 3 it can shrink to a point, each resample a
    reordering of the same rows), and intervals that rest on a part of the resamples only, the
    others leaving the statistic undefined (no row of some system, or no pair scored apart)."""
    notes = []
    if n_tasks < FEW_TASKS:
        notes.append(f"the intervals resample {n_tasks} tasks: percentile bootstrap intervals "
                     f"over fewer than {FEW_TASKS} groups cover less than their level (and can "
                     "be of zero width); read them as rough")
    partial = sorted({f"{level} {statistic}"
                      for level, by_metric in agreement.items()
                      for estimates in by_metric.values()
                      for statistic, estimate in estimates.items()
                      if estimate.get("ci") is not None
                      and estimate["n_valid"] < VALID_SHARE * n_resamples})
    if partial:
        notes.append(f"some intervals rest on fewer than {VALID_SHARE:.0%} of the {n_resamples} "
                     f"resamples ({', '.join(partial)}; n_valid gives each one's count): the "
                     "others left the statistic undefined (a resample without some system's "
                     "rows, or with no two rows scored apart), so the interval describes only "
                     "the resamples where it is defined")
    return notes


def _permutation_floor(level: str, units: int, n_permutations: int, family: int,
                       alpha: float) -> str | None:
    """What limits the permutation tests at ``level``, whose ``units`` (systems, or tasks:
    swapped whole) allow 2^units swap patterns: where they are no more than
    ``n_permutations`` (every pattern taken, the identity among them), no p-value is below
    1/2^units; Holm's correction over the ``family`` then leaves none below ``family`` times
    the least p. None where a p-value below ``alpha`` remains possible, after Holm too."""
    if not n_permutations or not family:
        return None
    what = "systems" if level == "system" else "tasks"
    exact = 2 ** min(units, 64) <= n_permutations
    least = 1 / 2 ** units if exact else 1 / (n_permutations + 1)
    if least * family <= alpha:
        return None
    text = (f"{_level_label(level)} permutation tests: with {units} {what} no p-value is below "
            f"1/{2 ** units} (the {2 ** units} ways to swap them)" if exact else
            f"{_level_label(level)} permutation tests: with {n_permutations} permutations no "
            f"p-value is below 1/{n_permutations + 1}")
    if family > 1:
        text += (f", and Holm's correction over the {family} comparisons leaves none below "
                 f"{min(1.0, least * family):.3g}")
    return text + f": no difference there can be significant at {alpha:g}"


def _level_label(level: str) -> str:
    return {"item": "item-level", "within_task": "within-task", "system": "system-level"}[level]


def _ceiling(data: _Data, frame: pd.DataFrame, counts: np.ndarray, confidence: float,
             threshold: float) -> dict[str, Any]:
    found = _reliability(frame)
    if found is None:
        return {"reason": "the table has no per-rater 'ratings' column (rater -> rating)"}
    raters, matrix = found
    rater, unit, own, rest = stats.rater_vs_rest(matrix)
    if np.unique(unit).size < 3:  # (two rows of two raters: four pairs, two mirror images)
        return {"reason": "fewer than 3 rows are rated by two or more raters"}
    codes = data.task_codes[unit]
    item = {}
    for name in ("pearson", "spearman"):
        resampled = stats.bootstrap_correlation(name, rest, own, codes, counts)
        item[name] = _estimate(stats.POINT_STATISTICS[name](own, rest), resampled, confidence)
    item["kendall_tau_b"] = {"value": _number(stats.kendall_tau_b(own, rest)), "ci": None,
                             "n_valid": 0}
    pair_groups = np.array([f"{r}\x00{t}" for r, t in zip(rater, data.tasks[unit], strict=True)])
    cdt = stats.darr_counts(rest, own, pair_groups, threshold)
    owner_labels, _ = stats.group_codes(pair_groups)
    owner_task = np.searchsorted(data.task_labels, [s.split("\x00", 1)[1] for s in owner_labels])
    task_cdt = np.zeros((data.task_labels.size, 3))
    np.add.at(task_cdt, owner_task, cdt)
    total = task_cdt.sum(axis=0)
    tau = (total[0] - total[1]) / total.sum() if total.sum() else math.nan
    alphas = {level: _number(stats.krippendorff_alpha(matrix, level))
              for level in ("interval", "ordinal")}
    per_rater = {}
    pearsons = stats.leave_one_rater_out(matrix, "pearson")
    spearmans = stats.leave_one_rater_out(matrix, "spearman")
    shared = np.bincount(rater, minlength=len(raters))  # (rows each shares with another)
    for k, name in enumerate(raters):  # (under 3 shared rows: listed, with no correlation)
        value = pearsons[k][1] if k in pearsons else math.nan
        per_rater[name] = {"n": int(shared[k]), "pearson": _number(value),
                           "spearman": _number(spearmans[k][1] if k in spearmans else math.nan)}
    return {
        "n_raters": len(raters),
        "n_ratings": int(np.isfinite(matrix).sum()),
        "n_rows_multi_rated": int(np.count_nonzero(np.isfinite(matrix).sum(axis=0) >= 2)),
        "krippendorff_alpha": alphas,
        "mean_rating": _mean_rating(matrix, data.human, alphas["interval"]),
        "leave_one_rater_out": {
            "item": item,
            "within_task": {"tau_darr": _estimate(tau, stats.bootstrap_darr(task_cdt, counts),
                                                  confidence)},
        },
        "per_rater": per_rater,
    }


def _mean_rating(matrix: np.ndarray, human: np.ndarray, alpha: float | None) -> dict[str, Any]:
    """How reliable the target is as the mean of the raters' grades (``matrix``, raters x rows),
    and the item-level Pearson with it of a metric that matched the raters' shared judgement
    exactly (the reliability's square root): the two-way estimate
    (:func:`stats.two_way_reliability`: each rater's leniency fitted, ICC(C,k) where every
    rater graded every row); where the design cannot tell leniency from the rows, Spearman-Brown
    from Krippendorff's interval ``alpha`` over the harmonic mean of the raters per row
    (:func:`stats.mean_rating_reliability`), which counts leniency as error. A reason where the
    target is not each row's mean grade (another column, or rows without grades), or the
    reliability is not above 0."""
    graded = np.isfinite(matrix).sum(axis=0)
    if not graded.all():
        return {"reason": f"{int((graded == 0).sum())} of the rows audited have no grade in "
                          "'ratings': their target is no mean of raters"}
    means = np.nanmean(matrix, axis=0)
    size = np.maximum(np.nanmax(np.abs(matrix), axis=0), np.abs(human))  # (grades that cancel)
    if np.any(np.abs(means - human) > 1e-9 * size):
        return {"reason": "the target is not each row's mean grade over its raters"}
    k, reliability = stats.mean_rating_reliability(math.nan if alpha is None else alpha, graded)
    fitted = stats.two_way_reliability(matrix)
    if fitted is not None:
        method = ("two-way: each rater's leniency fitted (ICC(C,k) where every rater graded "
                  "every row)")
        reliability = fitted
    else:
        method = ("Spearman-Brown of the interval alpha over the harmonic mean of raters per "
                  "row (the design does not tell the raters' leniency from the rows)")
    if not reliability > 0:
        value = "undefined" if math.isnan(reliability) else f"{reliability:.3g}"
        return {"reason": f"the mean rating's reliability ({method}) is {value}: no agreement "
                          "above chance to measure a metric against"}
    return {"method": method, "raters_per_row": _number(k), "reliability": _number(reliability),
            "perfect_metric_pearson": _number(math.sqrt(reliability))}


def _by_system(data: _Data, counts: np.ndarray, confidence: float) -> dict[str, Any]:
    """Rows, tasks, the mean target (CI over tasks) and each metric's mean, per system."""
    assert data.systems is not None
    labels, system_codes = stats.group_codes(data.systems)
    boot = stats.bootstrap_system_means(data.human, data.task_codes, system_codes, counts)
    out = {}
    for k, name in enumerate(labels):
        rows = system_codes == k
        out[str(name)] = {
            "n": int(rows.sum()),
            "n_tasks": int(np.unique(data.task_codes[rows]).size),
            "mean": _estimate(stats.mean(data.human[rows]), boot[:, k], confidence),
            "metrics": {m: _number(stats.mean(values[rows])) for m, values in data.scores.items()},
        }
    return out


def _ratio(numerator: np.ndarray, denominator: np.ndarray, counts: np.ndarray
           ) -> tuple[float, np.ndarray]:
    """The ratio of task sums, in the data and in each resample (nan where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        point = numerator.sum() / denominator.sum() if denominator.sum() else math.nan
        return point, (counts @ numerator) / (counts @ denominator)


#: The most grades a scale's integers make (0-10 has 11); a scale with more of them (0-100), or
#: fewer than 3 (0-1) where some rating is none of them, is cut into :data:`GRADE_BINS` bins of
#: equal width instead.
MAX_INTEGER_GRADES = 12
GRADE_BINS = 10


def _grades(human: np.ndarray, scale: tuple[float, float] | None
            ) -> tuple[np.ndarray, list[int | str], str]:
    """Each rating's grade (an index into the grades), the grades, and how they were made:
    ``"rounded"``, each rating rounded half up to one of the scale's integers (a Likert scale:
    3 to :data:`MAX_INTEGER_GRADES` of them); else ``"binned"``, :data:`GRADE_BINS` bins of
    equal width over the scale, each named by its interval (``[20, 30)``; the last one closed).
    A scale of 2 integers (0-1) is rounded where every rating is one of them. Without a scale,
    the ratings' observed range stands for it (rounded, where rounding is used). A scale whose
    ends are not integers (0.5 to 3.5) is binned: its ratings would round past them."""
    if scale is None:
        scale = (float(human.min()), float(human.max())) if human.size else (0.0, 0.0)
        low, high = math.floor(scale[0] + 0.5), math.floor(scale[1] + 0.5)
        integers = high - low + 1
    else:
        low, high = math.ceil(scale[0]), math.floor(scale[1])
        integers = high - low + 1 if (low, high) == scale else 0
    if 3 <= integers <= MAX_INTEGER_GRADES or (
            integers <= 2 and bool(np.all(human == np.round(human)))):
        rounded = np.floor(human + 0.5).astype(int)
        outside = (rounded < low) | (rounded > high)
        if outside.any():
            raise ValueError(f"{int(outside.sum())} rating(s) round to a grade outside the scale "
                             f"{list(scale)}, e.g. {float(human[outside][0])}; pass the study's "
                             "scale")
        return rounded - low, list(range(low, high + 1)), "rounded"
    outside = (human < scale[0]) | (human > scale[1])
    if outside.any():
        raise ValueError(f"{int(outside.sum())} rating(s) lie outside the scale {list(scale)}, "
                         f"e.g. {float(human[outside][0])}; pass the study's scale")
    if scale[1] <= scale[0]:  # one value throughout: one grade
        return np.zeros(human.size, int), [f"{scale[0]:g}"], "binned"
    # (rounded first: a mean of 0/1 labels such as 0.3 lies on its edge, not a hair below it)
    position = np.round((human - scale[0]) / (scale[1] - scale[0]) * GRADE_BINS, 9)
    index = np.clip(np.floor(position).astype(int), 0, GRADE_BINS - 1)
    edges = stats.round_significant(
        scale[0] + (scale[1] - scale[0]) * np.arange(GRADE_BINS + 1) / GRADE_BINS,
        stats.largest_abs(np.asarray(scale, float)), 9).tolist()
    names: list[int | str] = [f"[{edges[k]:.9g}, {edges[k + 1]:.9g}"
                              + ("]" if k == GRADE_BINS - 1 else ")") for k in range(GRADE_BINS)]
    return index, names, "binned"


def _pass_value(frame: pd.DataFrame, data: _Data, counts: np.ndarray, confidence: float,
                threshold: float, scale: tuple[float, float] | None) -> dict[str, Any]:
    """Ratings of passing against failing rows (Dibia et al. 2022); see the module docstring."""
    passed = numbers(frame, PASS)
    known = ~np.isnan(passed)
    odd = known & (passed != 0.0) & (passed != 1.0)
    if odd.any():
        raise ValueError(f"column '{PASS}' must hold 1.0 (pass), 0.0 (fail) or NaN (no tests); "
                         f"{row_label(frame, int(np.flatnonzero(odd)[0]))} holds "
                         f"{passed[odd][0]}")
    grade, names, grading = _grades(data.human[known], scale)
    grades = np.full(data.human.size, -1)
    grades[known] = grade
    n_tasks = data.task_labels.size
    out: dict[str, Any] = {"n_missing": int((~known).sum()), "grades": names,
                           "grading": grading}
    boot: dict[tuple[str, str], np.ndarray] = {}

    def task_sums(weights: np.ndarray) -> np.ndarray:
        return np.bincount(data.task_codes, weights=weights, minlength=n_tasks)

    for group, value in (("pass", 1.0), ("fail", 0.0)):
        rows = passed == value
        n = task_sums(rows.astype(float))
        block: dict[str, Any] = {"n": int(rows.sum()),
                                 "n_tasks": int(np.count_nonzero(n))}
        for key, numerator in (("mean", np.where(rows, data.human, 0.0)),
                               ("useful_share", (rows & (data.human >= threshold)).astype(float))):
            point, boot[(group, key)] = _ratio(task_sums(numerator), n, counts)
            block[key] = _estimate(point, boot[(group, key)], confidence)
        block["distribution"] = []
        for g, name in enumerate(names):
            hits = task_sums((rows & (grades == g)).astype(float))
            point, resampled = _ratio(hits, n, counts)
            block["distribution"].append({"grade": name, "n": int(hits.sum()),
                                          "share": _estimate(point, resampled, confidence)})
        out[group] = block
    out["difference"] = {}
    for key in ("mean", "useful_share"):
        va, vb = out["pass"][key]["value"], out["fail"][key]["value"]
        delta = boot[("pass", key)] - boot[("fail", key)]
        out["difference"][key] = _estimate(math.nan if va is None or vb is None else va - vb,
                                           delta, confidence)
    return out


def _metric_column(frame: pd.DataFrame, name: str) -> str:
    """The column a metric names: itself, or, as ``fit --features`` takes them, ``chrf`` for
    ``score.chrf``; an error that lists the score columns when there is none."""
    for column in (name, score_column(name)):
        if column in frame.columns:
            return column
    available = [str(c) for c in frame.columns if str(c).startswith(SCORE_PREFIX)]
    raise ValueError(f"no metric column {name!r} in the table; its score columns are "
                     f"{', '.join(available) or 'none (score it first)'}")


def _choose_focus(metrics: Sequence[str], focus: str | None, item: Mapping[str, Any]
                  ) -> tuple[str, str]:
    if focus is not None:
        if focus not in metrics:
            raise ValueError(f"focus metric '{focus}' is not among the audited metrics {metrics}")
        return focus, "named"
    if HYBRID in metrics:
        return HYBRID, "hybrid"
    scored = [(item[m]["pearson"]["value"], m) for m in metrics
              if item[m]["pearson"]["value"] is not None]
    if not scored:
        raise ValueError("no metric has a defined item-level Pearson correlation (one constant "
                         "on the rows audited has none), by which the focus of the comparisons "
                         "is chosen: name one (--focus METRIC)")
    return max(scored)[1], "best item pearson"


def audit(frame: pd.DataFrame, metrics: Sequence[str] | None = None, target: str = "rating",
          seed: int = 0, n_resamples: int = 10000, n_permutations: int = 10000,
          focus: str | None = None,
          comparisons: Sequence[tuple[str, str]] = DEFAULT_COMPARISONS,
          confidence: float = 0.95, alpha: float = 0.05, tie_threshold: float = 0.0,
          missing: str = "refuse", useful_threshold: float | None = None,
          scale: tuple[float, float] | None = None, where: str | Sequence[str] = (),
          constant_within: str = "zero") -> dict[str, Any]:
    """Audit metric-human agreement on a scored table; see the module docstring for the result.

    ``where``: audit only the rows that meet these ``FIELD=VALUE`` conditions
    (:func:`~hybridmetric.schema.select_rows`: ``language=java``), which the results and the
    signature record with the table's own row count.

    ``metrics`` defaults to every ``score.*`` column; ``focus`` (default ``score.hybrid`` when
    present, else the metric with the best item-level Pearson) is compared against every other
    metric at each ``(level, statistic)`` of ``comparisons``. ``tie_threshold`` is the human and
    metric tie tolerance of ``tau_darr`` (0: exact ties). A row missing the target or a metric
    (NaN: e.g. no tests to run) stops the audit when ``missing="refuse"``; with
    ``missing="drop-rows"`` such rows are left out of every statistic, so that all metrics are
    compared on the same rows, and ``n_dropped_rows`` says how many.

    ``constant_within``: how a within-task correlation treats a task whose rows the ratings
    score apart and the metric alike (undefined there): ``"zero"`` counts it 0, so that every
    metric is averaged over the same tasks (:func:`stats.constant_metric_as_zero`);
    ``"skip"`` leaves it out of that metric's mean (mt-metrics-eval's default, ICE-Score's
    example level).

    On the same rows, ``by_system`` summarises each system and, with a ``score.pass`` column,
    ``pass_value`` compares the ratings of passing and failing code: ``useful_threshold`` is the
    lowest useful rating (default: the middle of the scale, e.g. 2, "somewhat helpful, ... still
    useful", on the CoNaLa 0-4 scale; 0.5 on 0/1 labels) and ``scale`` the study's rating range,
    whose integers are the grades (or, a scale of more than :data:`MAX_INTEGER_GRADES` integers,
    10 bins of equal width; see :func:`_grades`; default: the ratings' observed range).
    """
    n_table_rows = len(frame)
    where = where_conditions(where)
    if where:
        frame = select_rows(frame, where)
    if metrics is None:  # (a score column may be the target: it is no metric of itself)
        metrics = [c for c in frame.columns if str(c).startswith(SCORE_PREFIX) and c != target]
    metrics = [_metric_column(frame, m) for m in metrics]
    if len(set(metrics)) != len(metrics):
        raise ValueError(f"a metric is named twice in {metrics} (--metrics)")
    if focus is not None:
        focus = _metric_column(frame, focus)
    if target in metrics or target == focus:
        raise ValueError(f"the target '{target}' is named as a metric too: it agrees with itself "
                         "perfectly; leave it out of --metrics and --focus")
    if not metrics:
        raise ValueError(f"no metric columns: the table has no '{SCORE_PREFIX}*' column; pass "
                         "metrics=[...] or score the table first")
    if n_resamples < 1 or n_permutations < 1:
        raise ValueError("the resample and permutation counts (--resamples, --permutations) "
                         f"must be positive, got {n_resamples} and {n_permutations}")
    if missing not in ("refuse", "drop-rows"):
        raise ValueError(f"missing must be 'refuse' or 'drop-rows', got {missing!r}")
    if not (math.isfinite(tie_threshold) and tie_threshold >= 0):
        raise ValueError(f"tie_threshold must be a number of 0 or more, got {tie_threshold!r}")
    if constant_within not in ("zero", "skip"):
        raise ValueError(f"constant_within must be 'zero' or 'skip', got {constant_within!r}")
    skipped: list[str] = []
    notes: list[str] = []  # what to know to read the numbers computed
    # a metric with no value on any row (pass_rate on a study without tests) has nothing to say
    empty = [m for m in metrics if frame[m].isna().all()]
    if empty:
        metrics = [m for m in metrics if m not in empty]
        skipped += [f"{m}: no row has a value (e.g. no tests to run, or no reference)"
                    for m in empty]
        if not metrics:
            raise ValueError(f"no metric has a value on any row ({', '.join(empty)})")
    n_dropped, dropped = 0, {}
    if missing == "drop-rows":
        needed = [target, *metrics]
        finite = finite_values(frame, needed)
        complete = finite.all(axis=1)
        if not complete.any():
            gaps = ", ".join(f"{c} ({int((~finite[:, k]).sum())} rows)"
                             for k, c in enumerate(needed) if not finite[:, k].all())
            raise ValueError(f"no row has a value in every column the audit needs; missing: "
                             f"{gaps}")
        n_dropped = int((~complete).sum())
        if n_dropped:
            tasks = frame["task_id"].nunique()
            dropped = {"by_column": {c: int((~finite[:, k]).sum()) for k, c in enumerate(needed)
                                     if not finite[:, k].all()},
                       "n_tasks": int(tasks - frame["task_id"][complete].nunique())}
        frame = renumbered(frame[complete])
    else:
        gaps = missing_rows(frame, [target, *metrics])
        if gaps:
            raise ValueError(missing_message(
                frame, gaps, "filter those rows before the audit, or leave them out of it "
                             "(--missing drop-rows)"))
    data = _Data(frame, metrics, target)
    if scale is not None:
        check_on_scale(frame, target, scale)
        check_grades_on_scale(frame, scale, target)
    if data.task_labels.size < 2:
        raise ValueError(f"the audit needs rows of at least 2 tasks (its intervals resample "
                         f"tasks); the table has {data.task_labels.size}")
    if np.unique(data.human).size < 2:
        raise ValueError(f"'{target}' takes one value on every row" + (
            f" ({data.human[0]:g})" if data.human.size else "") + ": no agreement with it can "
            "be measured")
    observed = data.human[~np.isnan(data.human)]
    if useful_threshold is not None:
        low, high = scale if scale is not None else (float(observed.min()), float(observed.max()))
        if not (math.isfinite(useful_threshold) and low <= useful_threshold <= high):
            raise ValueError(f"the lowest useful rating (--useful) {useful_threshold:g} lies "
                             f"outside the rating scale {low:g} to {high:g}"
                             + ("" if scale is not None else " (the ratings observed)"))
    if useful_threshold is None:  # the middle of the scale (given, else observed)
        if scale is not None:
            useful_threshold = (scale[0] + scale[1]) / 2
        elif observed.size:
            useful_threshold = (float(observed.min()) + float(observed.max())) / 2
    counts = stats.group_bootstrap_counts(data.task_labels.size, n_resamples, seed)
    agreement: dict[str, dict[str, Any]] = {"item": {}}
    grouped = bool((np.bincount(data.task_codes) >= 2).any())  # a task of two rows or more
    # the tasks whose ratings differ: those a within-task statistic (or a swap of one) can see
    rated_apart = int(stats.varies_per_group(data.human, data.tasks).sum())
    if not grouped:
        skipped.append("within-task level: no task has two rows (one candidate a task), so no "
                       "two candidates of a task can be compared")
    elif not rated_apart:
        skipped.append("within-task level: the ratings never differ within a task, so they "
                       "tell no two candidates of a task apart")
    else:
        agreement["within_task"] = {}
    resampled: dict[tuple[str, str, str], np.ndarray] = {}
    n_systems = None
    human_boot = None
    if data.systems is not None:
        n_systems = int(np.unique(data.systems).size)
        if n_systems < 3:
            skipped.append(f"system level: {n_systems} system(s); a correlation needs 3 or more")
        elif _constant(stats.system_means(data.human, data.systems), data.human):
            skipped.append("system level: every system has the same mean rating, so the ratings "
                           "tell no two systems apart")
        else:
            agreement["system"] = {}
            _, system_codes = stats.group_codes(data.systems)
            human_boot = stats.bootstrap_system_means(data.human, data.task_codes, system_codes,
                                                      counts)
    else:
        skipped.append("system level: " + ("no row names its system" if "system" in frame.columns
                                           else "the table has no 'system' column"))
    if data.human.size > stats.MAX_PAIR_ROWS:
        skipped.append(f"item level: {data.human.size} rows exceed {stats.MAX_PAIR_ROWS}, so "
                       "pairwise accuracy and the Kendall CIs (O(rows^2) pairs) are left out")
    for name in metrics:
        x = data.scores[name]
        levels = [("item", _item(data, x, counts, confidence))]
        if "within_task" in agreement:
            levels.append(("within_task", _within(data, x, counts, confidence, tie_threshold,
                                                  constant_within == "zero")))
        if human_boot is not None:
            levels.append(("system", _system(data, x, counts, confidence, human_boot)))
        for level, (estimates, boot) in levels:
            agreement[level][name] = estimates
            for statistic, vector in boot.items():
                resampled[(level, statistic, name)] = vector

    notes += _resampling_notes(agreement, data.task_labels.size, n_resamples)
    counted_zero = "tau_darr, and the correlations" if constant_within == "zero" else "tau_darr"
    within = (f", and within tasks it tells apart none of the rows the ratings score apart, "
              f"which counts 0 ({counted_zero})" if "within_task" in agreement else "")
    notes += [f"{m} takes one value on every row: its correlations are undefined{within}"
              for m in metrics if _constant(data.scores[m])]
    chosen, rule = _choose_focus(metrics, focus, agreement["item"])
    rows: list[dict[str, Any]] = []
    others = [m for m in metrics if m != chosen]
    for index, (level, statistic) in enumerate(comparisons):
        if level not in agreement:
            skipped.append(f"comparisons at {level} level: the level was not computed")
            continue
        if not others:
            skipped.append("comparisons: only one metric")
            break
        batch = stats.batch_statistic(level, statistic, data.human, data.tasks, data.systems,
                                      tie_threshold, constant_within == "zero")
        # rows of one task swapped together (see stats.perm_both); at system level, systems
        blocks = None if level == "system" else data.task_codes
        family = []
        units = {m: data.scores[m] for m in (chosen, *others)}  # what the permutations swap
        if level == "system":  # whole systems, their means (see stats.batch_statistic)
            assert data.systems is not None
            units = {m: stats.system_means(v, data.systems) for m, v in units.items()}
        if level == "item" and statistic in ("pearson", "spearman") and grouped:
            reason = ("Williams tests at item level: the test takes rows as independent, and "
                      "the rows of a task share its references (and their errors), which "
                      "overstates its confidence; the permutation test swaps whole tasks")
            if reason not in skipped:
                skipped.append(reason)
        for k, other in enumerate(others):
            constant = [m for m in (chosen, other) if _constant(units[m], data.scores[m])]
            if constant:  # (said once, not at every level and statistic)
                scope = "" if _constant(data.scores[constant[0]]) else " at the system level"
                reason = f"permutation tests {chosen} vs {other}: {constant[0]} is constant{scope}"
                if reason not in skipped:
                    skipped.append(reason)
                p_perm = None
            elif statistic == "tau_darr" and tie_threshold > 0:
                # (it z-scores both metrics, where a threshold on the scores has no equal)
                skipped.append(f"permutation test {chosen} vs {other} at tau_darr: it needs "
                               f"exact ties (tie_threshold 0, not {tie_threshold:g})")
                p_perm = None
            else:
                p_perm = _number(stats.perm_both(batch, units[chosen], units[other],
                                                 n_permutations, [seed, index, k], blocks)[0])
            va = agreement[level][chosen][statistic]["value"]
            vb = agreement[level][other][statistic]["value"]
            lo, hi = stats.bootstrap_difference_ci(resampled[(level, statistic, chosen)],
                                                   resampled[(level, statistic, other)],
                                                   confidence)
            family.append({
                "a": chosen, "b": other, "level": level, "statistic": statistic,
                "value_a": va, "value_b": vb,
                "delta": None if va is None or vb is None else va - vb,
                "ci": [lo, hi] if math.isfinite(lo) else None,
                "p_williams": (None if level == "item" and grouped
                               else _williams(level, statistic, data, chosen, other)),
                "p_permutation": p_perm,
            })
        for key, source in (("p_holm", "p_permutation"), ("p_williams_holm", "p_williams")):
            adjusted = stats.holm([np.nan if r[source] is None else r[source] for r in family])
            for row, value in zip(family, adjusted, strict=True):
                row[key] = _number(value)
        rows.extend(family)
        # what the swap patterns allow: systems, or the tasks whose swap can change the
        # statistic (within tasks, those of two rows or more that the ratings score apart)
        swapped = (len(units[chosen]) if blocks is None else data.task_labels.size
                   if level == "item" else rated_apart)
        note = _permutation_floor(level, swapped, n_permutations,
                                  sum(r["p_permutation"] is not None for r in family), alpha)
        if note and note not in notes:
            notes.append(note)

    i, _, _ = stats.within_group_pairs(data.tasks)
    cdt_counts = stats.darr_counts(data.human, data.human, data.tasks, tie_threshold)
    settings = {
        "seed": seed, "n_resamples": n_resamples, "n_permutations": n_permutations,
        "confidence": confidence, "alpha": alpha, "bootstrap_unit": "task",
        "ci_method": "percentile", "tie_threshold": tie_threshold, "missing": missing,
        "permutation": "PERM-BOTH (Deutsch et al. 2021): z-scored metrics, each task's rows "
                       "swapped together (system level, a variant: per-system means, whole "
                       "systems swapped), one-sided H1 a > b, p=(c+1)/(n+1), or exact over "
                       "every swap pattern where they are no more than the permutations",
        "williams": "one-sided H1 a > b (Graham & Baldwin 2014); Spearman values plugged in "
                    "for spearman; n = systems at system level; at item level only where "
                    "each task has one row (it takes rows as independent)",
        "constant_within": constant_within,
        "holm_family": "the focus metric against every other metric, per level and statistic",
        "comparisons": [f"{level}:{statistic}" for level, statistic in comparisons],
        "useful_threshold": useful_threshold, "scale": None if scale is None else list(scale),
    }
    fields = {"audit": AUDIT_VERSION, "target": target, "seed": seed, "boot": n_resamples,
              "unit": "task", "perm": n_permutations, "ci": confidence,
              "tie": tie_threshold, "missing": missing, "useful": useful_threshold,
              "constant": constant_within,
              # (with missing=drop-rows the metrics decide the rows; the focus, the comparisons)
              "metrics": ",".join(metrics), "focus": chosen,
              "scale": "observed" if scale is None else f"{scale[0]:g},{scale[1]:g}",
              **({"where": where_signature(where)} if where else {}),
              **environment(["numpy", "scipy", "krippendorff"])}
    extra: dict[str, Any] = {}
    if data.systems is not None:
        extra["by_system"] = _by_system(data, counts, confidence)
    if PASS in frame.columns:
        extra["pass_value"] = _pass_value(frame, data, counts, confidence, useful_threshold,
                                          scale)
    return {
        "signature": signature(fields),
        "target": target,
        "n_rows": int(data.human.size),
        "n_dropped_rows": n_dropped,
        **({"dropped": dropped} if dropped else {}),
        "where": where,
        "n_table_rows": n_table_rows,
        "n_tasks": int(data.task_labels.size),
        "n_systems": n_systems,
        "metrics": metrics,
        "focus": chosen,
        "focus_rule": rule,
        "agreement": agreement,
        "comparisons": rows,
        "ceiling": (_ceiling(data, frame, counts, confidence, tie_threshold)
                    if target == "rating" or "ratings" not in frame.columns else
                    {"reason": "the raters' grades ('ratings') grade 'rating', not "
                               f"the target '{target}'"}),
        "counts": {"within_task_pairs": int(i.size),
                   "human_tied_pairs": int(i.size - cdt_counts[:, 0].sum()),
                   "tasks_with_pairs": int(np.count_nonzero(np.bincount(data.task_codes) >= 2))},
        **extra,
        "skipped": skipped,
        "notes": notes,
        "settings": settings,
    }
