"""The unbiased pass@k estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
on Code", arXiv 2107.03374, section 2.1): ``1 - C(n - c, k) / C(n, k)``, and its mean over the
tasks of a scores table, per system, with a bootstrap interval over tasks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hybridmetric.schema import row_label


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn from ``n`` (``c`` correct) passes.

    Computed as the numerically stable product ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"pass@k: {name} must be an integer, got {value!r}")
    if k < 1:
        raise ValueError(f"pass@k: k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= c <= n, got c={c}, n={n}")
    if k > n:
        raise ValueError(
            f"pass@k: k={k} is larger than the n={n} samples drawn; draw at least k samples "
            "per problem or lower k"
        )
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_table(frame: pd.DataFrame, ks: Sequence[int], column: str = "score.pass",
                    by: str | None = "system", n_resamples: int = 10000,
                    seed: int = 0) -> list[dict]:
    """pass@k per group of ``frame`` (each value of column ``by``; one group, ``all``, when
    ``by`` is None): the mean over tasks of :func:`pass_at_k`, where a task's ``n`` is its number
    of rows in the group and ``c`` those whose ``column`` is 1, with a 95% percentile bootstrap
    interval over tasks (``n_resamples`` resamples from ``numpy.random.default_rng(seed)``; none
    when 0).

    Every row must have ``column`` 0 or 1 (a row without tests has no verdict: leave it out), and
    every task of a group at least ``max(ks)`` rows; an error names the rows or tasks that do not.
    """
    if column not in frame.columns:
        raise ValueError(f"no {column!r} column: score the table with pass_rate first "
                         "('hybridmetric score INPUT -o SCORES --scorers pass_rate'), or name "
                         "the column with --column")
    if not ks:
        raise ValueError("pass@k: give at least one k")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isin(values, (0.0, 1.0)))
    if len(bad):
        shown = _listed(bad, lambda r: f"{row_label(frame, r)} (task "
                                       f"{frame['task_id'].iloc[r]}: {frame[column].iloc[r]})")
        missing = np.isnan(values[bad])
        hints = []
        if not missing.all():
            hints.append("a sample passes or not: name a column of 0 and 1, such as "
                         "pass_rate's score.pass, not a fraction of cases passed")
        if missing.any():
            hints.append("rows without tests have no verdict: leave them out, with --missing "
                         "drop-rows")
        raise ValueError(f"pass@k needs {column} to be 0 or 1 in every row; not so in {shown} "
                         f"({'; '.join(hints)})")
    if by is None:
        keys = pd.Series("all", frame.index)
    elif by not in frame.columns:
        raise ValueError(f"no {by!r} column to group by; the columns are "
                         f"{', '.join(map(str, frame.columns))}")
    else:
        absent = np.flatnonzero(frame[by].isna().to_numpy())
        if len(absent):
            raise ValueError(f"{by} is missing in row(s) {_listed(absent)}; "
                             f"give every row its {by}, or compare no groups")
        keys = frame[by].astype(str)
    counts = (pd.DataFrame({"group": keys.to_numpy(), "task": frame["task_id"].astype(str),
                            "passed": values})
              .groupby(["group", "task"], sort=True)["passed"].agg(["size", "sum"]))
    rng = np.random.default_rng(seed)
    table = []
    for group, tasks in counts.groupby(level="group", sort=True):
        n, c = tasks["size"].to_numpy(), tasks["sum"].to_numpy().astype(int)
        short = tasks.index.get_level_values("task")[n < max(ks)]
        if len(short):
            where = f" of {by} {group!r}" if by else ""
            raise ValueError(
                f"pass@{max(ks)} needs at least {max(ks)} samples of each task; task(s)"
                f"{where} with fewer: {_listed(short)} (fewest: {n.min()}); lower k")
        row = {"group": group, "tasks": len(n), "samples": int(n.sum()),
               "min_samples": int(n.min()), "max_samples": int(n.max())}
        draws = rng.integers(0, len(n), size=(n_resamples, len(n)))
        for k in ks:
            per_task = np.array([pass_at_k(int(a), int(b), k) for a, b in zip(n, c, strict=True)])
            row[f"pass@{k}"] = float(per_task.mean())
            if n_resamples:
                low, high = np.percentile(per_task[draws].mean(axis=1), [2.5, 97.5])
                row[f"pass@{k}_ci"] = [float(low), float(high)]
        table.append(row)
    return table


def _listed(items: Sequence[Any], show: Callable[[Any], str] = str, limit: int = 5) -> str:
    """The first ``limit`` of ``items`` (only those are shown), and how many more there are."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(map(show, items[:limit])) + more
