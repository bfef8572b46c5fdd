"""Agreement statistics between metric scores and human ratings: pure functions over numpy arrays.

Each function names its source. Conventions everywhere:

- ``human`` is the human rating, ``metric`` the metric score, one value per row (generation);
  ``groups`` labels the task of each row, ``systems`` the system that produced it.
- Resampling uses ``numpy.random.default_rng(seed)``; Monte-Carlo p-values are ``(c + 1) / (n + 1)``
  (Phipson & Smyth 2010, "Permutation p-values should never be zero").
- Undefined correlations (a constant input) are ``nan``; callers decide how to report them.
- The bootstrap resamples groups (tasks) with replacement, never rows, because rows of one task
  share its references and difficulty. A resample is a ``(B, T)`` matrix of task multiplicities;
  the ``bootstrap_*`` functions evaluate a statistic on the multiset of rows it implies, exactly as
  if the rows had been copied, without copying them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import krippendorff
import numpy as np
import scipy.stats
from scipy import sparse

#: Largest row count for the O(n^2) item-level pair statistics (pooled Kendall, pairwise accuracy).
MAX_PAIR_ROWS = 6000
#: Permutations drawn per batch; part of the random stream, so fixed.
PERMUTATION_CHUNK = 200
ROWWISE_STATISTICS = ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c", "pairwise_accuracy")

# ----------------------------------------------------------------------------------------------
# Input checks and grouping


def as_vector(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """A finite 1-D float array, or a ValueError that names ``name``."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"{name} has a missing or infinite value at position {bad}; "
                         "drop or fill such rows before computing agreement")
    return array


def _paired(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = as_vector(x, "x"), as_vector(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} != {y.size}")
    if x.size < 2:
        raise ValueError(f"a correlation needs at least 2 values, got {x.size}")
    return x, y


def group_codes(labels: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(unique labels, code of each row)``: codes index the sorted unique labels."""
    uniques, codes = np.unique(np.asarray(labels), return_inverse=True)
    return uniques, codes.ravel()


# ----------------------------------------------------------------------------------------------
# Point estimates (scipy where it has them)


def _constant(values: np.ndarray, axis: int | None = None) -> np.ndarray | np.bool_:
    """Whether ``values`` (along ``axis``) are all one value (``ptp == 0``, without the
    subtraction that overflows for values of +-1e308)."""
    return np.max(values, axis=axis) == np.min(values, axis=axis)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r (``scipy.stats.pearsonr``); nan when either input is constant."""
    x, y = _paired(x, y)
    if _constant(x) or _constant(y):
        return float("nan")
    return float(scipy.stats.pearsonr(_summable(x), _summable(y)).statistic)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho with mid-ranks for ties (``scipy.stats.spearmanr``); nan when constant."""
    x, y = _paired(x, y)
    if _constant(x) or _constant(y):
        return float("nan")
    return float(scipy.stats.spearmanr(x, y).statistic)


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b (Kendall 1945; ``scipy.stats.kendalltau(variant="b")``)."""
    x, y = _paired(x, y)
    if _constant(x) or _constant(y):
        return float("nan")
    return float(scipy.stats.kendalltau(x, y, variant="b").statistic)


def kendall_tau_c(x: np.ndarray, y: np.ndarray) -> float:
    """Stuart's tau-c (Stuart 1953; ``scipy.stats.kendalltau(variant="c")``)."""
    x, y = _paired(x, y)
    if _constant(x) or _constant(y):
        return float("nan")
    return float(scipy.stats.kendalltau(x, y, variant="c").statistic)


POINT_STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall_tau_b": kendall_tau_b,
    "kendall_tau_c": kendall_tau_c,
}


# ----------------------------------------------------------------------------------------------
# Pairs: pairwise accuracy (acc23) with tie calibration, and the CodeBERTScore da-RR tau


def _relation(diff: np.ndarray, tolerance: float) -> np.ndarray:
    """-1, 0, +1: the sign of ``diff``, with ``|diff| <= tolerance`` a tie."""
    return np.where(np.abs(diff) <= tolerance, 0, np.sign(diff)).astype(np.int8)


def within_group_pairs(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All unordered pairs ``i < j`` of rows in the same group: ``(i, j, group code)``."""
    _, codes = group_codes(groups)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0, True])
    first, second, owner = [], [], []
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        rows = order[start:stop]
        i, j = np.triu_indices(rows.size, 1)
        first.append(rows[i])
        second.append(rows[j])
        owner.append(np.full(i.size, codes[rows[0]]))
    return np.concatenate(first), np.concatenate(second), np.concatenate(owner)


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All unordered pairs of ``n`` rows, up to :data:`MAX_PAIR_ROWS` rows."""
    if n > MAX_PAIR_ROWS:
        raise ValueError(f"item-level pair statistics over {n} rows need {n * (n - 1) // 2} "
                         f"pairs; the limit is {MAX_PAIR_ROWS} rows: audit a subset of the rows")
    return _triu_pairs(n)


@functools.lru_cache(maxsize=4)
def _triu_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = (index.astype(np.int32) for index in np.triu_indices(n, 1))
    i.flags.writeable = j.flags.writeable = False
    return i, j


def _pair_arrays(human: np.ndarray, metric: np.ndarray, groups: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human relation, metric difference and pair weight for acc23's pairs.

    Without groups every pair counts once; with groups each group's pairs share weight 1, so the
    result is the mean over groups of the per-group accuracy (mt-metrics-eval ``average_by``).
    """
    human, metric = _paired(human, metric)
    if groups is None:
        i, j = _all_pairs(human.size)
        weight = np.ones(i.size)
    else:
        i, j, owner = within_group_pairs(groups)
        if i.size == 0:
            raise ValueError("no group has two rows, so there are no within-group pairs")
        weight = 1.0 / np.bincount(owner)[owner]
    return _relation(human[i] - human[j], 0.0), metric[i] - metric[j], weight


def pairwise_accuracy(human: np.ndarray, metric: np.ndarray, groups: np.ndarray | None = None,
                      epsilon: float = 0.0) -> float:
    """Pairwise accuracy with ties, acc23 (Deutsch, Foster & Freitag 2023, arXiv 2305.14324).

    The share of pairs on which metric and human agree: same order, or both tied. Human ties count.
    The metric ties a pair when its scores differ by at most ``epsilon``. With ``groups``, the mean
    over groups of the within-group accuracy.
    """
    relation, diff, weight = _pair_arrays(human, metric, groups)
    agree = relation == _relation(diff, epsilon)
    return float(np.sum(weight * agree) / np.sum(weight))


def tie_calibration(human: np.ndarray, metric: np.ndarray, groups: np.ndarray | None = None
                    ) -> tuple[float, float]:
    """acc23 with tie calibration (Deutsch et al. 2023, Algorithm 1): ``(epsilon, accuracy)``.

    Searches every distinct ``|metric difference|`` (and 0) for the tie threshold that maximises
    :func:`pairwise_accuracy`; the smallest maximiser wins.
    """
    _, epsilon, accuracy = accuracy_and_calibration(human, metric, groups)
    return epsilon, accuracy


def accuracy_and_calibration(human: np.ndarray, metric: np.ndarray,
                             groups: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(acc23 at epsilon 0, calibrated epsilon, acc23 at it)`` from one pass over the pairs."""
    relation, diff, weight = _pair_arrays(human, metric, groups)
    gap = np.abs(diff)
    order = np.argsort(gap, kind="stable")
    gap, relation, sign, weight = gap[order], relation[order], np.sign(diff[order]), weight[order]
    right = weight * ((sign == relation) & (relation != 0))
    tie_gain = np.cumsum(weight * (relation == 0))  # pairs with gap <= eps that humans tie
    order_gain = np.r_[np.cumsum(right[::-1])[::-1][1:], 0.0]  # gap > eps, ordered right
    last = np.r_[gap[1:] != gap[:-1], True]  # evaluate at the end of each block of equal gaps
    candidates = np.r_[0.0, gap[last]]
    zero = np.sum(weight * ((gap == 0) & (relation == 0))) + np.sum(right * (gap > 0))
    scores = np.r_[zero, (tie_gain + order_gain)[last]] / np.sum(weight)
    # (the smallest: sums of 1/pairs weights taken in two orders can differ in the last bits)
    best = int(np.flatnonzero(scores >= scores.max() - 1e-12)[0])
    return float(scores[0]), float(candidates[best]), float(scores[best])


def darr_counts(human: np.ndarray, metric: np.ndarray, groups: np.ndarray, threshold: float = 0.0,
                inclusive: bool = True) -> np.ndarray:
    """Per-group ``(concordant, discordant, metric-tied)`` pair counts, da-RR variant B.

    Pairs of rows in the same group; a pair whose two scores differ by at most ``threshold``
    (``inclusive``) or by less than it (``inclusive=False``; equal scores are always tied) is a tie,
    for the humans and for the metric alike. Human ties are skipped. Returns shape (groups, 3),
    rows in the order of the sorted unique group labels. CodeBERTScore's ``kendalls_tau_darr``
    (evaluation/calc_correlation.py) is ``threshold=0.001, inclusive=False``.
    """
    human, metric = _paired(human, metric)
    uniques, _ = group_codes(groups)
    i, j, owner = within_group_pairs(groups)
    h = _tie_relation(human[i] - human[j], threshold, inclusive)
    m = _tie_relation(metric[i] - metric[j], threshold, inclusive)
    keep = h != 0
    kinds = np.stack([h == m, h == -m, m == 0], axis=1) & keep[:, None]
    out = np.zeros((uniques.size, 3))
    np.add.at(out, owner, kinds.astype(float))
    return out


def _tie_relation(diff: np.ndarray, threshold: float, inclusive: bool) -> np.ndarray:
    if inclusive:
        return _relation(diff, threshold)
    return np.where((diff == 0) | (np.abs(diff) < threshold), 0, np.sign(diff)).astype(np.int8)


def tau_darr(human: np.ndarray, metric: np.ndarray, groups: np.ndarray, threshold: float = 0.0,
             inclusive: bool = True) -> float:
    """CodeBERTScore's within-problem Kendall tau (Zhou et al. 2023, arXiv 2302.05527, Table 1).

    The "da-RR" tau of Stanchev et al. 2020, variant B: over pairs of rows of the same task,
    ``(C - D) / (C + D + T)`` with human ties skipped and metric ties ``T`` counted, pooled over
    tasks. See ``codebertscore-humaneval/SOURCES.md`` and :func:`darr_counts` for the tie rule.
    """
    c, d, t = darr_counts(human, metric, groups, threshold, inclusive).sum(axis=0)
    total = c + d + t
    return float((c - d) / total) if total else float("nan")


# ----------------------------------------------------------------------------------------------
# Row-wise statistics over a batch: each row of X and Y is one small sample (a task, a resample)


def rank_rows(values: np.ndarray) -> np.ndarray:
    """Mid-ranks along the last axis, as ``scipy.stats.rankdata(method="average")``, vectorised."""
    values = np.atleast_2d(np.asarray(values, float))
    n = values.shape[1]
    order = np.argsort(values, axis=1)
    ordered = np.take_along_axis(values, order, axis=1)
    index = np.broadcast_to(np.arange(n), values.shape)
    first = np.ones(values.shape, bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    last = np.ones(values.shape, bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, index, 0), axis=1)
    stop = np.minimum.accumulate(np.where(last, index, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, (start + stop) / 2 + 1, axis=1)
    return ranks


def _power_of_two_under(values: np.ndarray, times: float = 1.0, axis: int | None = None
                        ) -> np.ndarray:
    """0 (along ``axis``: for each row or column alone); or, where ``times`` the sum of
    ``values``' magnitudes overflows (scores of 1e307), the exponent of a power of two at least
    their largest magnitude: ``values`` over it (exactly: only the exponents change) sum without
    overflow, and a mean of them, scaled back, is the mean as it would be."""
    keep = axis is not None
    with np.errstate(over="ignore"):
        total = times * np.abs(values).sum(axis=axis, keepdims=keep)
    if not values.size or np.isfinite(total).all() or not np.isfinite(values).all():
        return np.zeros_like(total, dtype=int)
    largest = np.max(np.abs(values), axis=axis, keepdims=keep)
    return np.where(np.isfinite(total), 0, np.frexp(largest)[1])


def _summable(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``values`` as floats, over :func:`_power_of_two_under` them (along ``axis``): what is
    scale-invariant (a correlation) is as it was."""
    values = np.asarray(values, dtype=float)
    exponent = _power_of_two_under(values, axis=axis)
    return np.ldexp(values, -exponent) if exponent.any() else values


def mean(values: np.ndarray) -> float:
    """The mean of ``values``, whose sum may overflow (scores of 1e307: see
    :func:`_power_of_two_under`)."""
    values = np.asarray(values, dtype=float)
    exponent = _power_of_two_under(values)
    return float(np.ldexp(np.ldexp(values, -exponent).mean(), exponent))


def centred(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``values`` less their mean, over their largest deviation (along ``axis``; a Pearson r is
    the same): sums of their squares neither overflow (ratings of 1e160) nor lose their digits
    to underflow (1e-160); nor their sums (scores of 1e307: see :func:`_summable`)."""
    values = _summable(values, axis)
    deviations = values - values.mean(axis=axis, keepdims=axis is not None)
    if deviations.size == 0:
        return deviations
    largest = np.max(np.abs(deviations), axis=axis, keepdims=axis is not None)
    usable = (largest > 0) & np.isfinite(largest)
    return deviations / np.where(usable, largest, 1.0)


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc, yc = centred(x, axis=1), centred(y, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sum(xc * yc, axis=1) / np.sqrt(np.sum(xc**2, axis=1) * np.sum(yc**2, axis=1))
    constant = _constant(x, axis=1) | _constant(y, axis=1)
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def _distinct_per_row(values: np.ndarray) -> np.ndarray:
    ordered = np.sort(values, axis=1)
    return 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)


def rowwise(statistic: str, x: np.ndarray, y: np.ndarray, epsilon: float = 0.0) -> np.ndarray:
    """``statistic`` between row ``r`` of ``x`` and of ``y`` for every row: shape (R,).

    ``x`` is the metric, ``y`` the human side; ``epsilon`` is the metric tie threshold of
    ``pairwise_accuracy``. Constant rows give nan (except for pairwise accuracy). Matches the scipy
    functions above row by row.
    """
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in shape: {x.shape} != {y.shape}")
    if statistic == "pearson":
        return _rowwise_pearson(x, y)
    if statistic == "spearman":
        return _rowwise_pearson(rank_rows(x), rank_rows(y))
    i, j = np.triu_indices(x.shape[1], 1)
    sx = _relation(x[:, i] - x[:, j], epsilon if statistic == "pairwise_accuracy" else 0.0)
    sy = _relation(y[:, i] - y[:, j], 0.0)
    if statistic == "pairwise_accuracy":
        return np.mean(sx == sy, axis=1)
    concordance = np.sum(sx * sy, axis=1, dtype=float)
    constant = _constant(x, axis=1) | _constant(y, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if statistic == "kendall_tau_b":
            tau = concordance / np.sqrt(np.sum(sx != 0, axis=1) * np.sum(sy != 0, axis=1))
        elif statistic == "kendall_tau_c":
            n = x.shape[1]
            m = np.minimum(_distinct_per_row(x), _distinct_per_row(y))
            tau = 2 * concordance / (n**2 * (m - 1) / m)
        else:
            raise ValueError(f"unknown statistic {statistic!r}; choose from {ROWWISE_STATISTICS}")
    return np.where(constant, np.nan, tau)


def per_group(statistic: str, human: np.ndarray, metric: np.ndarray, groups: np.ndarray,
              epsilon: float = 0.0) -> np.ndarray:
    """``statistic`` within each group (sorted unique labels); nan for groups of one row.

    The ICE-Score "example level" (Zhuo 2024, arXiv 2304.14317) is the nan-mean of this.
    """
    human, metric = _paired(human, metric)
    _, codes = group_codes(groups)
    sizes = np.bincount(codes)
    out = np.full(sizes.size, np.nan)
    order = np.argsort(codes, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    for size in np.unique(sizes[sizes >= 2]):
        members = np.flatnonzero(sizes == size)
        rows = order[starts[members][:, None] + np.arange(size)[None, :]]
        out[members] = rowwise(statistic, metric[rows], human[rows], epsilon)
    return out


def varies_per_group(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Whether ``values`` differ within each group (sorted unique labels)."""
    _, codes = group_codes(groups)
    low = np.full(int(codes.max()) + 1 if codes.size else 0, np.inf)
    high = np.full_like(low, -np.inf)
    np.minimum.at(low, codes, values)
    np.maximum.at(high, codes, values)
    return high > low


def constant_metric_as_zero(per_task: np.ndarray, human: np.ndarray, metric: np.ndarray,
                            groups: np.ndarray) -> np.ndarray:
    """``per_task`` (a statistic of each group: :func:`per_group`) with 0 where it is undefined
    because the metric scores alike all the rows of a group that the humans score apart (a
    correlation's: pairwise accuracy stays as it is): such a metric tells none of the
    differences the humans see (mt-metrics-eval's ``replace_nans_with_zeros``). Left out
    instead (nan), a coarse metric (exact match, pass) would be averaged over the few groups it
    does split, and ranked against the others on groups of its own choosing; so every metric's
    mean is over the same groups, those the humans score apart."""
    human, metric = _paired(human, metric)
    out = np.array(per_task, dtype=float)
    out[np.isnan(out) & varies_per_group(human, groups) & ~varies_per_group(metric, groups)] = 0
    return out


#: The significant digits (of the largest value averaged) that means keep (:func:`settled_means`).
MEAN_DIGITS = 12


def settled_means(means: np.ndarray, magnitude: float) -> np.ndarray:
    """``means`` of values no larger than ``magnitude`` in size, rounded to :data:`MEAN_DIGITS`
    significant digits of it (:func:`round_significant`): the means of equal values summed in
    another order differ by a unit in the last place (5/3 as 1.6666666666666665 and
    1.6666666666666667), which would split a tie that rank statistics count, or make a constant
    side vary. (Of the values, not of the means: means that cancel to zero keep no noise.)"""
    return round_significant(means, magnitude, MEAN_DIGITS)


def round_significant(values: np.ndarray, largest: float, digits: int) -> np.ndarray:
    """``values`` rounded to the decimal of the ``digits``-th significant digit of ``largest``
    (their largest size), whatever its magnitude: 11 decimals for 12 digits of 4, 17 of 1e-6.
    As they are where ``largest`` is 0 or so small (below ~1e-290) that its decimal's power of
    ten would overflow."""
    if not largest > 0:
        return values
    decimals = digits - int(np.floor(np.log10(largest))) - 1
    return values if decimals > 300 else np.round(values, decimals)


def shown_decimals(largest: float, decimals: int = 3) -> int:
    """The decimals that show numbers on a scale whose largest value is ``largest`` as finely,
    for its size, as ``decimals`` show them on a scale of 0 to 1: 3 on 0 to 1, 0 to 4 or 0 to
    100 (never fewer), 4 on 0 to 0.5, 9 on 0 to 1e-6 (a report's numbers)."""
    if not largest or not math.isfinite(largest):
        return decimals
    return max(decimals, decimals - math.floor(math.log10(abs(largest))))


def largest_abs(values: np.ndarray) -> float:
    """The largest finite value of ``values`` in size (0 where none is)."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size else 0.0


def system_means(values: np.ndarray, systems: np.ndarray) -> np.ndarray:
    """Mean of ``values`` per system, in the order of the sorted unique system labels
    (:func:`settled_means`)."""
    _, codes = group_codes(systems)
    exponent = _power_of_two_under(values)
    means = np.bincount(codes, weights=np.ldexp(values, -exponent)) / np.bincount(codes)
    return settled_means(np.ldexp(means, exponent), largest_abs(values))


# ----------------------------------------------------------------------------------------------
# Bootstrap over groups


def group_bootstrap_counts(n_groups: int, n_resamples: int, seed: int) -> np.ndarray:
    """Multiplicity of each of ``n_groups`` groups in each resample, shape (B, T), float.

    Each resample draws ``n_groups`` groups uniformly with replacement (Efron & Tibshirani 1993;
    the cluster bootstrap of Field & Welsh 2007).
    """
    if n_groups < 2:
        raise ValueError(f"the bootstrap over groups needs at least 2 groups, got {n_groups}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_groups, size=(n_resamples, n_groups))
    counts = np.zeros((n_resamples, n_groups))
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return counts


def percentile_ci(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap ``values``, ignoring nan resamples."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_difference_ci(resampled_a: np.ndarray, resampled_b: np.ndarray,
                            confidence: float = 0.95) -> tuple[float, float]:
    """Paired bootstrap CI of ``stat(a) - stat(b)`` (Koehn 2004; Efron & Tibshirani 1993).

    ``resampled_a`` and ``resampled_b`` must come from the same resamples (same counts matrix),
    so each difference compares the two metrics on the same tasks.
    """
    a, b = np.asarray(resampled_a, float), np.asarray(resampled_b, float)
    if a.shape != b.shape:
        raise ValueError("paired bootstrap needs both metrics evaluated on the same resamples")
    return percentile_ci(a - b, confidence)


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r per row of weights ``w`` (B, n) over values x, y of shape (n,)."""
    x, y = centred(x), centred(y)  # (the sums well conditioned)
    total = w.sum(axis=1)
    sx, sy = w @ x, w @ y
    vxx = w @ (x * x) - sx**2 / total
    vyy = w @ (y * y) - sy**2 / total
    sxy = w @ (x * y) - sx * sy / total
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sxy / np.sqrt(vxx * vyy)
    return np.where(_vanishing(vxx, x, total) | _vanishing(vyy, y, total), np.nan,
                    np.clip(r, -1.0, 1.0))


def _vanishing(variance_sum: np.ndarray, centred: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Whether a sum of squared deviations is rounding noise, i.e. the values are constant."""
    return variance_sum <= 1e-12 * total * max(float(np.max(centred**2)), 1e-300)


def _midranks(codes: np.ndarray, n_values: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass (B, U) of each of ``n_values`` sorted unique values and its mid-rank.

    ``codes`` (n,) gives the unique-value index of each element, ``w`` (B, n) its multiplicity.
    """
    batch = w.shape[0]
    flat = (np.arange(batch)[:, None] * n_values + codes[None, :]).ravel()
    mass = np.bincount(flat, w.ravel(), minlength=batch * n_values).reshape(batch, n_values)
    return mass, np.cumsum(mass, axis=1) - (mass - 1) / 2


def _unique_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    uniques, inverse = np.unique(values, return_inverse=True)
    return inverse.ravel(), uniques.size


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


def weighted_statistic(statistic: str, x: np.ndarray, y: np.ndarray, weights: np.ndarray,
                       chunk: int = 500) -> np.ndarray:
    """Pearson or Spearman of x and y in the multiset each row of ``weights`` (B, n) defines.

    Row ``b`` holds value pair k ``weights[b, k]`` times; Spearman uses the mid-ranks of that
    multiset (copies of a value are ties), exactly as ``scipy.stats.spearmanr`` on the copies.
    """
    return _weighted(statistic, x, y, lambda part: weights[part], weights.shape[0], chunk)


def _weighted(statistic: str, x: np.ndarray, y: np.ndarray,
              weights_of: Callable[[slice], np.ndarray], n_rows: int, chunk: int) -> np.ndarray:
    x, y = _paired(x, y)
    if statistic not in ("pearson", "spearman"):
        raise ValueError(f"weighted_statistic supports pearson and spearman, not {statistic!r}")
    out = np.empty(n_rows)
    (ix, ux), (iy, uy) = _unique_codes(x), _unique_codes(y)
    for part in _chunks(n_rows, chunk):
        w = weights_of(part)
        if statistic == "pearson":
            out[part] = _weighted_pearson(x, y, w)
            continue
        n = w.sum(axis=1)
        mass_x, rank_x = _midranks(ix, ux, w)
        mass_y, rank_y = _midranks(iy, uy, w)
        sx, sy = np.sum(mass_x * rank_x, axis=1), np.sum(mass_y * rank_y, axis=1)
        vxx = np.sum(mass_x * rank_x**2, axis=1) - sx**2 / n
        vyy = np.sum(mass_y * rank_y**2, axis=1) - sy**2 / n
        sxy = np.einsum("ij,ij->i", w * rank_x[:, ix], rank_y[:, iy]) - sx * sy / n
        with np.errstate(invalid="ignore", divide="ignore"):
            r = sxy / np.sqrt(vxx * vyy)
        out[part] = np.where((vxx <= 0) | (vyy <= 0), np.nan, np.clip(r, -1.0, 1.0))
    return out


def bootstrap_correlation(statistic: str, human: np.ndarray, metric: np.ndarray,
                          codes: np.ndarray, counts: np.ndarray, chunk: int = 500) -> np.ndarray:
    """Pearson or Spearman of the pooled rows of each group resample: shape (B,).

    Pearson uses per-group sums (one (B, T) x (T, 6) product); Spearman re-ranks each resample.
    """
    if statistic != "pearson":
        return _weighted(statistic, metric, human, lambda part: counts[part][:, codes],
                         counts.shape[0], chunk)
    x, y = _paired(metric, human)
    x, y = centred(x), centred(y)  # (the sums well conditioned)
    columns = np.stack([np.ones_like(x), x, y, x * x, y * y, x * y], axis=1)
    sums = np.zeros((counts.shape[1], 6))
    np.add.at(sums, codes, columns)
    n, sx, sy, sxx, syy, sxy = (counts @ sums).T
    vxx, vyy = sxx - sx**2 / n, syy - sy**2 / n
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (sxy - sx * sy / n) / np.sqrt(vxx * vyy)
    return np.where(_vanishing(vxx, x, n) | _vanishing(vyy, y, n), np.nan, np.clip(r, -1.0, 1.0))


def _pair_block_sums(x: np.ndarray, y: np.ndarray, codes: np.ndarray, epsilon: float,
                     block: int = 256) -> dict[str, np.ndarray]:
    """Sums over all ordered row pairs, aggregated into (group, group) cells.

    ``xy``: sign(dx) sign(dy); ``x``/``y``: pairs not tied in x / y; ``agree``: acc23 agreement
    at tolerance 0; ``agree_eps``: at ``epsilon``. Each pair (i, j) lands in cell (g_i, g_j).
    """
    n_groups = int(codes.max()) + 1
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    xs, ys = x[order], y[order]
    sums = {key: np.zeros((n_groups, n_groups)) for key in ("xy", "x", "y", "agree", "agree_eps")}
    for part in _chunks(x.size, block):
        dx = xs[part, None] - xs[None, :]
        sx = np.sign(dx)
        sy = np.sign(ys[part, None] - ys[None, :])
        blocks = {"xy": sx * sy, "x": sx != 0, "y": sy != 0, "agree": sx == sy,
                  "agree_eps": _relation(dx, epsilon) == sy}
        rows = codes[order][part]
        for key, value in blocks.items():
            cells = np.add.reduceat(value.astype(float), starts, axis=1)
            np.add.at(sums[key], rows, cells)
    return sums


def _distinct_present(values: np.ndarray, codes: np.ndarray, counts: np.ndarray,
                      chunk: int = 1000) -> np.ndarray:
    """Number of distinct ``values`` present in each resample."""
    _, value_codes = np.unique(values, return_inverse=True)
    incidence = sparse.csr_matrix((np.ones(values.size), (value_codes.ravel(), codes)))
    out = np.empty(counts.shape[0])
    for part in _chunks(counts.shape[0], chunk):
        present = incidence @ counts[part].T  # (values, B)
        out[part] = np.count_nonzero(present, axis=0)
    return out


def bootstrap_pair_statistics(human: np.ndarray, metric: np.ndarray, codes: np.ndarray,
                              counts: np.ndarray, epsilon: float = 0.0) -> dict[str, np.ndarray]:
    """Pooled Kendall tau-b, tau-c and acc23 (at 0 and at ``epsilon``) per group resample.

    With ``c`` a row of ``counts`` and ``A`` a (group, group) pair-sum matrix, the resample's sum
    over ordered pairs is ``c' A c``, so each statistic costs one (B, T) x (T, T) product.
    Copies of one row in a resample are tied with each other, as in a materialised resample,
    which leaves tau-b as it is. acc23 counts the pairs of distinct rows only: a row and its
    copy, tied in both human and metric, would count as agreeing, which no pair of the data
    does, and pull the interval up (for a metric that ties every pair, above its estimate).
    """
    human, metric = _paired(human, metric)
    _all_pairs(human.size)  # enforce the size limit
    sums = _pair_block_sums(metric, human, codes, epsilon)
    sizes = np.bincount(codes, minlength=counts.shape[1]).astype(float)
    n = counts @ sizes

    # counts @ matrix holds integers below 2**24 when this bound holds, so float32 is exact
    exact32 = counts.sum(axis=1).max() * sizes.max() ** 2 < 2**24
    dtype = np.float32 if exact32 else np.float64
    low = counts.astype(dtype)

    def quad(matrix: np.ndarray) -> np.ndarray:
        return np.einsum("bt,bt->b", (low @ matrix.astype(dtype)).astype(float), counts)

    xy, tied_x, tied_y = quad(sums["xy"]), quad(sums["x"]), quad(sums["y"])
    agree = quad(sums["agree"])
    distinct = np.minimum(_distinct_present(metric, codes, counts),
                          _distinct_present(human, codes, counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = xy / np.sqrt(tied_x * tied_y)
        tau_c = xy / (n**2 * (distinct - 1) / distinct)
        alike = (counts.astype(float) ** 2) @ sizes  # ordered pairs of copies of one row
        accuracy = (agree - alike) / (n**2 - alike)
        accuracy_tc = ((quad(sums["agree_eps"]) - alike) / (n**2 - alike) if epsilon > 0
                       else accuracy)
    return {
        "kendall_tau_b": tau_b,
        "kendall_tau_c": np.where(distinct > 1, tau_c, np.nan),
        "pairwise_accuracy": accuracy,
        "pairwise_accuracy_tc": accuracy_tc,
    }


def bootstrap_group_mean(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Mean of per-group ``values`` in each resample, skipping nan groups (a weighted nan-mean)."""
    defined = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts @ np.where(defined, values, 0.0)) / (counts @ defined.astype(float))


def bootstrap_darr(counts_cdt: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`tau_darr` per resample from per-group ``(C, D, T)`` counts (:func:`darr_counts`)."""
    pooled = counts @ counts_cdt
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pooled[:, 0] - pooled[:, 1]) / pooled.sum(axis=1)


def bootstrap_system_means(values: np.ndarray, codes: np.ndarray, system_codes: np.ndarray,
                           counts: np.ndarray) -> np.ndarray:
    """Per-system means of ``values`` in each group resample: (B, S); nan for absent systems
    (:func:`settled_means`)."""
    n_groups, n_systems = counts.shape[1], int(system_codes.max()) + 1
    exponent = _power_of_two_under(values, float(counts.max(initial=1.0)))
    cell_sum = np.zeros((n_groups, n_systems))
    cell_n = np.zeros((n_groups, n_systems))
    np.add.at(cell_sum, (codes, system_codes), np.ldexp(values, -exponent))
    np.add.at(cell_n, (codes, system_codes), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.ldexp((counts @ cell_sum) / (counts @ cell_n), exponent)
    return settled_means(means, largest_abs(values))


# ----------------------------------------------------------------------------------------------
# Significance of a difference between two metrics


#: How near 1 the two metrics' correlation |r23| is taken as 1 (their float error is ~1e-16;
#: metrics that differ by 1e-5 of the ratings' spread are still 1e-11 from it).
SAME_METRIC = 1e-12


def williams_test(r12: float, r13: float, r23: float, n: int) -> float:
    """One-sided p-value that r12 > r13 for dependent correlations sharing variable 1.

    Williams (1959) as given by Graham & Baldwin (2014, EMNLP, eq. 1): variable 1 is the human
    score, 2 and 3 the two metrics, ``r23`` their correlation, ``n`` the sample size;
    ``t = (r12 - r13) sqrt((n-1)(1+r23)) / sqrt(2K(n-1)/(n-3) + ((r12+r13)/2)^2 (1-r23)^3)``
    with ``K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23``, on n - 3 degrees of freedom.
    NaN where the two metrics are one up to a linear map (|r23| within :data:`SAME_METRIC` of 1;
    with Spearman's rho, where they rank alike): the statistic is then 0/0, which rounding
    turns into any value (``K``, the determinant of the correlation matrix, rounds to either
    side of 0).
    """
    if n <= 3:
        raise ValueError(f"the Williams test needs more than 3 observations, got {n}")
    if 1 - abs(r23) <= SAME_METRIC:
        return float("nan")
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    numerator = (r12 - r13) * np.sqrt((n - 1) * (1 + r23))
    denominator = np.sqrt(2 * k * (n - 1) / (n - 3) + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3)
    if denominator == 0:
        return float("nan")
    return float(scipy.stats.t.sf(numerator / denominator, n - 3))


def corrected_resampled_t(differences: np.ndarray, test_to_train: float) -> tuple[float, float]:
    """(t, one-sided p) that the mean of ``differences`` (one per train/test split of a
    repeated cross-validation, e.g. a fold's correlation of one model minus another's) is above
    0: the corrected resampled t-test of Nadeau & Bengio (2003, Machine Learning 52),
    as Bouckaert & Frank (2004, PAKDD) apply it to r-times-repeated k-fold cross-validation:
    ``t = mean(d) / sqrt((1/J + n_test/n_train) var(d))`` over J = len(d) splits, on J - 1
    degrees of freedom. The folds share training rows, so the plain t-test's ``1/J`` alone
    understates the variance and finds gains that are not there; ``test_to_train`` is 1/(k-1)
    for k folds. NaN where fewer than 2 differences or they do not vary (all equal: t is 0/0
    or infinite)."""
    d = as_vector(differences, "differences")
    if not test_to_train > 0:
        raise ValueError(f"test_to_train must be above 0, got {test_to_train}")
    if len(d) < 2 or _constant(d):
        return float("nan"), float("nan")
    t = float(d.mean() / math.sqrt((1 / len(d) + test_to_train) * d.var(ddof=1)))
    return t, float(scipy.stats.t.sf(t, len(d) - 1))


def zscore(values: np.ndarray) -> np.ndarray:
    """Standardised values (population sd), as PERM-BOTH swaps scores on a common scale."""
    values = as_vector(values, "values")
    deviations = centred(values)  # (its std neither overflows nor underflows)
    sd = deviations.std()
    if sd == 0:
        raise ValueError("a constant metric cannot be standardised for the permutation test")
    return deviations / sd


class BatchStatistic:
    """An agreement statistic of each row of a (B, n) batch of metric vectors with fixed humans."""

    def __init__(self, function: Callable[[np.ndarray], np.ndarray]):
        self.function = function

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return self.function(np.atleast_2d(batch))

    def swapped(self, first: np.ndarray, second: np.ndarray, swap: np.ndarray) -> np.ndarray:
        """The statistic of ``where(swap, second, first)`` for each row of ``swap``.

        ``swap`` is a (B, n) array of 0.0 and 1.0 (1: take ``second``).
        """
        return self(np.where(swap, second, first))


class _ItemSpearman(BatchStatistic):
    """Item-level Spearman; ranks swapped vectors within the pooled scores of both metrics."""

    def __init__(self, human: np.ndarray):
        y = rank_rows(human)[0]
        self.y = (y - y.mean()) / np.linalg.norm(y - y.mean())
        super().__init__(lambda batch: _unit_correlation(rank_rows(batch), self.y))

    def swapped(self, first: np.ndarray, second: np.ndarray, swap: np.ndarray) -> np.ndarray:
        n, batch = first.size, swap.shape[0]
        inverse, n_values = _unique_codes(np.concatenate([first, second]))
        inverse = inverse.astype(np.int32)
        flat = np.where(swap, inverse[n:], inverse[:n]) + (
            np.arange(batch, dtype=np.int32) * n_values)[:, None]
        mass = np.bincount(flat.ravel(), minlength=batch * n_values).reshape(batch, n_values)
        ranks = np.cumsum(mass, axis=1) - (mass - 1) / 2
        spread = np.einsum("ij,ij->i", mass, ranks**2) - n * ((n + 1) / 2) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            return (ranks.ravel()[flat] @ self.y) / np.sqrt(spread)


class _ItemPearson(BatchStatistic):
    """Item-level Pearson; a swapped vector's moments are linear in the swap indicators."""

    def __init__(self, human: np.ndarray):
        deviations = centred(human)
        self.y = deviations / np.linalg.norm(deviations)
        super().__init__(lambda batch: _unit_correlation(batch, self.y))

    def swapped(self, first: np.ndarray, second: np.ndarray, swap: np.ndarray) -> np.ndarray:
        change = second - first
        # einsum: a skinny product that threaded BLAS handles badly on a busy machine
        moments = np.einsum("bn,kn->bk", swap, np.stack([change, second**2 - first**2,
                                                         change * self.y]))
        total = first.sum() + moments[:, 0]
        spread = np.sum(first**2) + moments[:, 1] - total**2 / first.size
        with np.errstate(invalid="ignore", divide="ignore"):
            return (first @ self.y + moments[:, 2]) / np.sqrt(spread)


class _SystemStatistic(BatchStatistic):
    """A row-wise statistic of a batch of per-system means with the humans' per-system means."""

    def __init__(self, statistic: str, human: np.ndarray, systems: np.ndarray):
        self.statistic = statistic
        self.human_means = system_means(human, systems)
        super().__init__(lambda means: rowwise(
            self.statistic, means, np.broadcast_to(self.human_means, means.shape)))


class _WithinDarr(BatchStatistic):
    """:func:`tau_darr` of a batch; swaps score as a quadratic form in the swap indicators."""

    def __init__(self, human: np.ndarray, groups: np.ndarray, threshold: float):
        i, j, _ = within_group_pairs(groups)
        h = _relation(human[i] - human[j], threshold)
        keep = h != 0
        self.i, self.j, self.h, self.threshold = i[keep], j[keep], h[keep].astype(float), threshold
        self.n = human.size
        super().__init__(self._tau)

    def _tau(self, batch: np.ndarray) -> np.ndarray:
        if not self.h.size:  # the humans tie every pair: undefined
            return np.full(batch.shape[0], np.nan)
        related = _relation(batch[:, self.i] - batch[:, self.j], self.threshold)
        return (related @ self.h) / self.h.size

    def swapped(self, first: np.ndarray, second: np.ndarray, swap: np.ndarray) -> np.ndarray:
        i, j, h = self.i, self.j, self.h
        # agreement of pair p when row i takes score a (0: first, 1: second) and row j takes b
        table = [[_relation(u[i] - v[j], self.threshold) * h for v in (first, second)]
                 for u in (first, second)]
        base, only_i, only_j = table[0][0], table[1][0] - table[0][0], table[0][1] - table[0][0]
        both = table[1][1] - table[1][0] - table[0][1] + table[0][0]
        linear = (sparse.csr_matrix((only_i, (i, np.zeros_like(i))), shape=(self.n, 1))
                  + sparse.csr_matrix((only_j, (j, np.zeros_like(j))), shape=(self.n, 1)))
        pairs = sparse.csr_matrix((both, (i, j)), shape=(self.n, self.n))
        total = base.sum() + np.asarray(linear.T @ swap.T).ravel()
        total += np.einsum("bn,bn->b", np.asarray(pairs.T @ swap.T).T, swap)
        return total / h.size


def _unit_correlation(x: np.ndarray, y_unit: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``x`` with ``y_unit`` (centred, unit norm)."""
    x = x - x.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x @ y_unit) / np.sqrt(np.einsum("ij,ij->i", x, x))


def perm_both(statistic: Callable[[np.ndarray], np.ndarray] | BatchStatistic,
              metric_a: np.ndarray, metric_b: np.ndarray, n_permutations: int,
              seed: int | Sequence[int], blocks: np.ndarray | None = None
              ) -> tuple[float, float, np.ndarray]:
    """PERM-BOTH paired permutation test (Deutsch, Dror & Roth 2021, arXiv 2104.00054).

    ``statistic`` maps a (B, n) batch of metric score vectors to B agreement values with the
    fixed human scores. Both metrics are z-scored; each permutation swaps the two metrics' scores
    of every unit (a row; at system level a system's mean: see :func:`batch_statistic`)
    independently with probability 1/2 (as in mt-metrics-eval), or, with ``blocks`` (each
    unit's block, codes 0..k-1: its task), of every block's units together: rows of one task
    share its references, so that their metric errors go together, and rows swapped one by one
    would count a task's shared error as evidence (null simulations with a per-task error: 9-10%
    of p below 0.05 with single rows swapped, 5-6% with tasks; a test of exchangeable tasks, as
    the bootstrap resamples tasks; at within-task level, a sign-flip test of the tasks'
    differences). Returns ``(p, delta, permuted deltas)`` for H1: a agrees better than b,
    where ``p = (#{permuted delta >= delta} + 1) / (#permutations + 1)``, over the permutations
    whose delta is defined; where the 2^k swap patterns of the k units (or blocks) are no more
    than ``n_permutations``, all are taken, the identity among them, and p is the exact share
    ``#{delta* >= delta} / 2^k`` (at least 1/2^k). p is NaN where the observed delta is
    undefined (a statistic of nothing: every tie) or no permuted one is.
    """
    if not isinstance(statistic, BatchStatistic):
        statistic = BatchStatistic(statistic)
    za, zb = zscore(metric_a), zscore(metric_b)
    if za.shape != zb.shape:
        raise ValueError("both metrics must score the same rows")
    if blocks is not None:
        blocks = np.asarray(blocks)
        if (blocks.shape != za.shape or blocks.dtype.kind not in "iu"
                or blocks.size and blocks.min() < 0):
            raise ValueError("blocks must give each unit a block code 0..k-1")
    units = za.size if blocks is None else int(blocks.max()) + 1 if blocks.size else 0
    delta = float(statistic(za)[0] - statistic(zb)[0])
    if not math.isfinite(delta):
        return math.nan, delta, np.full(n_permutations, np.nan)
    exact = 2 ** units <= n_permutations  # every pattern, once, the identity among them
    rng = np.random.default_rng(seed)
    deltas = np.empty(2 ** units if exact else n_permutations)
    buffer = np.empty((PERMUTATION_CHUNK, za.size))  # reused: fresh large arrays page-fault
    place = 2 ** np.arange(units - 1, -1, -1)  # (each pattern's bits, as itertools.product)
    for part in _chunks(deltas.size, PERMUTATION_CHUNK):
        size = part.stop - part.start
        if exact:
            drawn = (np.arange(part.start, part.stop)[:, None] // place) % 2
        else:
            bits = rng.integers(0, 256, size=(size, -(-units // 8)), dtype=np.uint8)
            drawn = np.unpackbits(bits, axis=1, count=units)
        swap = buffer[:size]
        swap[...] = drawn if blocks is None else drawn[:, blocks]
        deltas[part] = statistic.swapped(za, zb, swap) - statistic.swapped(zb, za, swap)
    defined = int(np.count_nonzero(np.isfinite(deltas)))
    if not defined:
        return math.nan, delta, deltas
    exceed = int(np.count_nonzero(deltas >= delta - 1e-12))
    return ((exceed / defined) if exact else (exceed + 1) / (defined + 1)), delta, deltas


def batch_statistic(level: str, statistic: str, human: np.ndarray, groups: np.ndarray | None = None,
                    systems: np.ndarray | None = None, threshold: float = 0.0,
                    constant_as_zero: bool = False) -> BatchStatistic:
    """``statistic`` at ``level`` for each row of a (B, n) batch of metric vectors.

    Levels: ``item`` (pearson, spearman over all rows), ``within_task`` (tau_darr over pairs in a
    group, or the mean over groups of a row-wise statistic, a metric constant in a group the
    humans score apart counted 0 there with ``constant_as_zero``: see
    :func:`constant_metric_as_zero`), ``system`` (any row-wise statistic
    of per-system means, which its batch holds: (B, systems), as :func:`system_means` gives
    them). Used by :func:`perm_both`, which swaps what the statistic sees: rows, or at system
    level whole systems, a variant of PERM-BOTH (Deutsch et al. swap rows there too: averaged
    per system, both metrics' permuted means then tend to one mixture, the permuted deltas
    shrink to 0 and random ratings gave 31-61% of differences between two metrics p < 0.05).
    Swapping systems is approximate too (a test of exchangeable metrics, not of equal
    correlations): 3-9% at 0.05 in null simulations with 5-12 systems, the most where one
    metric sets a system apart; with S systems no p is below 1/2^S.
    """
    human = as_vector(human, "human")
    if level == "item" and statistic == "spearman":
        return _ItemSpearman(human)
    if level == "item" and statistic == "pearson":
        return _ItemPearson(human)
    if level == "within_task" and groups is not None:
        if statistic == "tau_darr":
            return _WithinDarr(human, groups, threshold)
        if statistic in ROWWISE_STATISTICS:
            def mean(row: np.ndarray) -> float:
                values = per_group(statistic, human, row, groups)
                if constant_as_zero:
                    values = constant_metric_as_zero(values, human, row, groups)
                return float(np.nanmean(values))
            return BatchStatistic(lambda batch: np.array([mean(row) for row in batch]))
    if level == "system" and systems is not None and statistic in ROWWISE_STATISTICS:
        return _SystemStatistic(statistic, human, systems)
    raise ValueError(f"no batch form for statistic {statistic!r} at level {level!r} "
                     "(item: pearson, spearman; within_task: tau_darr or a row-wise statistic with "
                     f"groups; system: {', '.join(ROWWISE_STATISTICS)} with systems)")


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, in the input order; nan entries stay nan."""
    p = np.asarray(pvalues, float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(np.isfinite(p))
    m = valid.size
    order = valid[np.argsort(p[valid], kind="stable")]
    adjusted = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out[order] = np.minimum(adjusted, 1.0)
    return out


# ----------------------------------------------------------------------------------------------
# Inter-rater agreement: the human ceiling


def krippendorff_alpha(reliability: np.ndarray, level: str = "interval") -> float:
    """Krippendorff's alpha (Krippendorff 2011) via the ``krippendorff`` package.

    ``reliability`` has one row per rater and one column per unit, nan where a rater did not rate.
    ``level`` is ``interval`` or ``ordinal`` (the ordinal value domain is the values present).
    """
    if level not in ("interval", "ordinal"):
        raise ValueError(f"level must be 'interval' or 'ordinal', got {level!r}")
    data = np.asarray(reliability, float)
    if data.ndim != 2 or np.count_nonzero(np.sum(np.isfinite(data), axis=0) >= 2) == 0:
        raise ValueError("Krippendorff's alpha needs a raters x units matrix with at least one "
                         "unit rated by two or more raters")
    if np.unique(data[np.isfinite(data)]).size < 2:  # no disagreement to expect: undefined
        return math.nan
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def mean_rating_reliability(single: float, raters_per_unit: np.ndarray) -> tuple[float, float]:
    """``(k, reliability)``: the reliability of units' mean ratings, each the mean of its own
    number of raters (``raters_per_unit``, each 1 or more), where one rating's reliability is
    ``single`` (Krippendorff's interval alpha: an intraclass correlation of one rater, in which
    a rater's leniency counts as error, as it does in the means where units have raters of
    their own: Shrout & Fleiss 1979's case 1).

    The Spearman-Brown formula (Spearman 1910; Brown 1910), ``k r / (1 + (k - 1) r)``, with
    ``k`` the harmonic mean of the raters per unit: the mean error variance of the units' means
    is one rating's over ``k`` where their numbers of raters differ. Its square root is the
    Pearson correlation with the mean ratings of a metric that tracked the raters' shared
    judgement exactly (Spearman's attenuation). Nan where ``single`` is nan."""
    counts = np.asarray(raters_per_unit, float)
    if counts.size == 0 or not np.all(counts >= 1):
        raise ValueError("each unit's mean needs at least one rating")
    k = float(scipy.stats.hmean(counts))
    return k, k * single / (1 + (k - 1) * single)


#: The fewest residual degrees of freedom, and the largest share of the variance of the units'
#: means that the leniencies' estimation error may add to their mean leniency's, with which
#: :func:`two_way_reliability` gives an estimate (in simulations, designs past them gave
#: reliabilities off by 0.1 to below 0: raters linked through one unit, chains of raters).
MIN_FREEDOM = 10
INFLATION_SHARE = 0.05


def two_way_reliability(ratings: np.ndarray) -> float | None:
    """The reliability of units' mean ratings (raters x units, nan where a rater did not grade),
    a rater's overall leniency taken apart: the additive model grade = unit + rater + error,
    fitted by least squares (the intra-block analysis of an incomplete block design: the
    raters' effects from their reduced normal equations ``C b = Q``, ``C = diag(m) - N'
    diag(1/k) N``), gives the error variance (on its residual degrees of freedom) and each
    rater's leniency. A unit's mean is noisy by the error over its k raters and by the mean
    leniency of the raters it happens to have; the variance of that mean leniency over the
    units is taken less what the leniencies' own estimation error adds to it (``sigma^2 C+``),
    and the reliability is 1 - the noise over the variance of the means. Where every rater
    grades every unit this is ICC(C,k) (McGraw & Wong 1996; ICC(3,k) of Shrout & Fleiss 1979,
    whose Table 2 gives 0.91). Its square root is the Pearson correlation with the means of a
    metric that matched the raters' shared judgement exactly (Spearman's attenuation), where
    which raters grade a unit does not depend on its quality (lenient raters given the better
    units make it low). None where the design does not tell leniency from the units well:
    fewer than :data:`MIN_FREEDOM` residual degrees of freedom (raters who each grade one unit
    have none), groups of raters that share no unit, or leniencies whose estimation error adds
    over :data:`INFLATION_SHARE` of the variance of the means (raters linked through a few
    units, or with few grades each). Nan where the means are alike but for rounding."""
    data = np.asarray(ratings, float)
    if data.ndim != 2:
        raise ValueError("the ratings must be a raters x units matrix")
    data = data[np.isfinite(data).any(axis=1)]  # (a rater with no grade says nothing)
    n_raters, n = data.shape
    rated = np.isfinite(data)
    graded, grades = rated.sum(axis=0), rated.sum(axis=1)
    if (graded == 0).any():
        raise ValueError("each unit's mean needs at least one rating")
    rater, unit = np.nonzero(rated)
    values = centred(data[rater, unit])  # (the same reliability; no square overflows)
    freedom = values.size - n - n_raters + 1
    incidence = sparse.csr_matrix((np.ones(values.size), (unit, rater)), shape=(n, n_raters))
    shares = sparse.diags(1 / graded) @ incidence  # a unit's mean leniency: shares @ leniencies
    reduced = np.diag(grades.astype(float)) - (incidence.T @ shares).toarray()  # C
    if freedom < MIN_FREEDOM or np.linalg.matrix_rank(reduced) < n_raters - 1:  # linked)
        return None
    means = np.bincount(unit, values, n) / graded
    if np.ptp(means) <= 1e-12:  # (alike but for rounding: of the largest deviation, 1)
        return math.nan
    inverse = np.linalg.pinv(reduced)
    leniencies = inverse @ (np.bincount(rater, values, n_raters) - incidence.T @ means)  # C+ Q
    lenient = shares @ leniencies  # each unit's mean leniency of its raters
    residual = values - (means - lenient)[unit] - leniencies[rater]
    error = residual @ residual / freedom
    # what the leniencies' error (error * C+) adds to the variance of the units' mean leniency:
    # the trace of C+ times the centred shares' cross-products, over n - 1
    average = np.asarray(shares.mean(axis=0)).ravel()
    products = (shares.T @ shares).toarray() - n * np.outer(average, average)
    inflation = error * float(np.sum(inverse * products)) / (n - 1)
    spread = float(np.var(lenient, ddof=1))
    variance = float(means.var(ddof=1))
    if inflation > INFLATION_SHARE * variance:
        return None
    noise = max(spread - inflation, 0.0) + np.mean(error / graded)
    return float(1 - noise / variance)


def rater_vs_rest(reliability: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Leave-one-rater-out pairs: ``(rater, unit, own rating, mean of the other raters)``.

    One entry per rating whose unit has at least one other rating. Correlating ``own`` with the
    rest gives how well a single human agrees with the others: the ceiling a metric, scored against
    the same kind of aggregate, can be expected to reach (cf. the human baselines of Mathur et al.
    2020 and WMT metrics tasks).
    """
    data = np.asarray(reliability, float)
    rated = np.isfinite(data)
    numbers = rated.sum(axis=0)
    rater, unit = np.nonzero(rated & (numbers >= 2)[None, :])
    own = data[rater, unit]
    # each sum of the others exact, rounded once (math.fsum): equal grades give equal means
    # in any order, a tie that the rank correlations count
    grades = {u: data[rated[:, u], u].tolist() for u in np.unique(unit).tolist()}
    rest = np.array([math.fsum([*grades[u], -value]) for u, value
                     in zip(unit.tolist(), own.tolist(), strict=True)]) / (numbers[unit] - 1)
    return rater, unit, own, rest


def leave_one_rater_out(reliability: np.ndarray, statistic: str = "pearson",
                        min_units: int = 3) -> dict[int, tuple[int, float]]:
    """Per rater (row index): ``(units, statistic(own rating, mean of the others))``.

    Raters with fewer than ``min_units`` shared units are left out of the result.
    """
    rater, _, own, rest = rater_vs_rest(reliability)
    function = POINT_STATISTICS[statistic]
    out = {}
    for r in np.unique(rater):
        mask = rater == r
        if mask.sum() >= min_units:
            out[int(r)] = (int(mask.sum()), function(rest[mask], own[mask]))
    return out
