"""hybridmetric.stats against independent computations: scipy, statsmodels, the krippendorff
package's published examples, brute force, exhaustive enumeration and hand-worked cases."""

from __future__ import annotations

import importlib.util
import itertools
import math
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from hybridmetric import stats


def _data(seed: int, n_groups: int = 12, size: int = 4, levels: int = 5
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tied integer ratings, a noisy metric with ties, and group labels (all groups of ``size``)."""
    rng = np.random.default_rng(seed)
    human = rng.integers(0, levels, n_groups * size).astype(float)
    metric = np.round(human + rng.normal(0, 1.5, human.size), 1)
    groups = np.repeat([f"task{k}" for k in range(n_groups)], size)
    return human, metric, groups


def _materialise(counts_row: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of one group resample and a distinct label per copy of a group."""
    labels, codes = np.unique(groups, return_inverse=True)
    rows, copy_labels = [], []
    for g, times in enumerate(counts_row.astype(int)):
        members = np.flatnonzero(codes == g)
        for copy in range(times):
            rows.extend(members)
            copy_labels.extend([f"{labels[g]}#{copy}"] * members.size)
    return np.array(rows), np.array(copy_labels)


# ---- point estimates ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, reference", [
    ("pearson", lambda x, y: scipy.stats.pearsonr(x, y).statistic),
    ("spearman", lambda x, y: scipy.stats.spearmanr(x, y).statistic),
    ("kendall_tau_b", lambda x, y: scipy.stats.kendalltau(x, y, variant="b").statistic),
    ("kendall_tau_c", lambda x, y: scipy.stats.kendalltau(x, y, variant="c").statistic),
])
def test_point_statistics_equal_scipy(name, reference):
    human, metric, _ = _data(0)
    assert stats.POINT_STATISTICS[name](metric, human) == pytest.approx(reference(metric, human))
    assert np.isnan(stats.POINT_STATISTICS[name](np.ones(5), np.arange(5.0)))


def test_bad_inputs_fail_loudly():
    with pytest.raises(ValueError, match="missing or infinite value at position 1"):
        stats.pearson(np.array([1.0, np.nan, 2.0]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="differ in length"):
        stats.spearman(np.arange(3.0), np.arange(4.0))
    with pytest.raises(ValueError, match="at least 2"):
        stats.kendall_tau_b(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="constant metric"):
        stats.zscore(np.ones(4))


@pytest.mark.parametrize("name", stats.ROWWISE_STATISTICS)
def test_rowwise_and_per_group_match_scipy_row_by_row(name):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, (30, 6)).astype(float)
    y = rng.integers(0, 3, (30, 6)).astype(float)
    x[0] = 2.0  # a constant row
    got = stats.rowwise(name, x, y)
    for r in range(x.shape[0]):
        if name == "pairwise_accuracy":
            expected = stats.pairwise_accuracy(y[r], x[r])
        else:
            expected = stats.POINT_STATISTICS[name](x[r], y[r])
        np.testing.assert_allclose(got[r], expected, equal_nan=True, atol=1e-12)
    # per_group with unequal group sizes and a single-row group (nan)
    human, metric = y.ravel()[:20], x.ravel()[:20]
    groups = np.array(["a"] * 3 + ["b"] * 7 + ["c"] + ["d"] * 9)
    values = stats.per_group(name, human, metric, groups)
    assert np.isnan(values[2])
    for label in "abd":
        rows = groups == label
        expected = stats.rowwise(name, metric[rows][None], human[rows][None])[0]
        np.testing.assert_allclose(values["abcd".index(label)], expected, equal_nan=True)


# ---- pairwise accuracy, tie calibration, da-RR tau --------------------------------------------

def test_pairwise_accuracy_hand_computed():
    human = np.array([1.0, 2.0, 3.0, 3.0])
    metric = np.array([1.0, 3.0, 2.0, 2.0])
    # pairs: (0,1) agree, (0,2) agree, (0,3) agree, (1,2) disagree, (1,3) disagree, (2,3) tie=tie
    assert stats.pairwise_accuracy(human, metric) == pytest.approx(4 / 6)
    # with epsilon 1 only (0,1) keeps its order; (2,3) stays a shared tie
    assert stats.pairwise_accuracy(human, metric, epsilon=1.0) == pytest.approx(2 / 6)


def _brute_accuracy(human, metric, epsilon, groups=None, origin=None):
    """acc23 over every pair (of a group), but pairs of two copies of one row (``origin``)."""
    per = {}
    for i, j in itertools.combinations(range(human.size), 2):
        if groups is not None and groups[i] != groups[j]:
            continue
        if origin is not None and origin[i] == origin[j]:
            continue
        dm = metric[i] - metric[j]
        m = 0 if abs(dm) <= epsilon else np.sign(dm)
        per.setdefault(None if groups is None else groups[i], []).append(
            m == np.sign(human[i] - human[j]))
    return float(np.mean([np.mean(v) for v in per.values()]))


@pytest.mark.parametrize("grouped", [False, True])
def test_tie_calibration_equals_brute_force_search(grouped):
    human, metric, groups = _data(2, n_groups=8, size=5)
    metric = np.round(metric / 3, 0)  # coarse, so ties and small gaps are common
    g = groups if grouped else None
    epsilon, accuracy = stats.tie_calibration(human, metric, g)
    gaps = {0.0} | {abs(a - b) for a, b in itertools.combinations(metric, 2)}
    brute = {eps: _brute_accuracy(human, metric, eps, g) for eps in sorted(gaps)}
    best = max(brute.values())
    assert accuracy == pytest.approx(best)
    assert epsilon == min(e for e, v in brute.items() if v == pytest.approx(best))
    acc0, eps, acc = stats.accuracy_and_calibration(human, metric, g)
    assert acc0 == pytest.approx(brute[0.0]) == pytest.approx(stats.pairwise_accuracy(
        human, metric, g))
    assert (eps, acc) == (epsilon, accuracy)


def test_tie_calibration_finds_a_positive_threshold_when_humans_tie_often():
    human = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    metric = np.array([0.0, 0.01, 0.02, 0.03, 1.0, 1.01, 1.02, 1.03])
    epsilon, accuracy = stats.tie_calibration(human, metric)
    assert accuracy == 1.0
    assert epsilon == pytest.approx(0.03)


def _codebertscore_darr(human, metric, groups, threshold):
    """CodeBERTScore's kendalls_tau_darr, re-written from evaluation/calc_correlation.py."""
    c = d = t = 0
    for i, j in itertools.permutations(range(human.size), 2):  # their ordered pairs
        if groups[i] != groups[j]:
            continue
        def rank(a, b):
            return (1, 1) if a == b or abs(a - b) < threshold else ((1, 2) if a > b else (2, 1))
        h, m = rank(human[i], human[j]), rank(metric[i], metric[j])
        if h[0] == h[1]:
            continue
        if m[0] == m[1]:
            t += 1
        elif (h[0] < h[1]) == (m[0] < m[1]):
            c += 1
        else:
            d += 1
    return (c - d) / (c + d + t)


def test_tau_darr_hand_case_and_codebertscore_loop():
    human = np.array([1.0, 2.0, 3.0, 1.0, 1.0, 2.0])
    metric = np.array([0.1, 0.3, 0.2, 0.5, 0.4, 0.4])
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    # a: (0,1) C, (0,2) C, (1,2) D; b: (3,4) human tie skipped, (3,5) D, (4,5) metric tie
    assert stats.tau_darr(human, metric, groups) == pytest.approx((2 - 2) / 5)
    np.testing.assert_array_equal(stats.darr_counts(human, metric, groups), [[2, 1, 0], [0, 1, 1]])
    human, metric, groups = _data(3, n_groups=10, size=5)
    metric = np.round(metric / 4, 3)
    for threshold in (0.0, 0.001, 0.3):
        assert stats.tau_darr(human, metric, groups, threshold, inclusive=False) == pytest.approx(
            _codebertscore_darr(human, metric, groups, threshold))


# ---- bootstrap over groups --------------------------------------------------------------------

def test_group_bootstrap_counts_are_seeded_whole_groups():
    counts = stats.group_bootstrap_counts(7, 50, seed=3)
    assert counts.shape == (50, 7)
    np.testing.assert_array_equal(counts.sum(axis=1), 7)
    np.testing.assert_array_equal(counts, np.round(counts))
    np.testing.assert_array_equal(counts, stats.group_bootstrap_counts(7, 50, seed=3))
    assert not np.array_equal(counts, stats.group_bootstrap_counts(7, 50, seed=4))
    with pytest.raises(ValueError, match="at least 2 groups"):
        stats.group_bootstrap_counts(1, 10, seed=0)


def test_bootstrap_statistics_equal_materialised_resamples():
    human, metric, groups = _data(4, n_groups=9, size=4)
    labels, codes = stats.group_codes(groups)
    counts = stats.group_bootstrap_counts(labels.size, 6, seed=5)
    pearson = stats.bootstrap_correlation("pearson", human, metric, codes, counts)
    spearman = stats.bootstrap_correlation("spearman", human, metric, codes, counts)
    pairs = stats.bootstrap_pair_statistics(human, metric, codes, counts, epsilon=0.5)
    darr = stats.bootstrap_darr(stats.darr_counts(human, metric, groups), counts)
    per_task = stats.per_group("kendall_tau_b", human, metric, groups)
    mean_tau = stats.bootstrap_group_mean(per_task, counts)
    systems = np.tile(["s1", "s2", "s3", "s4"], labels.size)
    _, system_codes = stats.group_codes(systems)
    means = stats.bootstrap_system_means(metric, codes, system_codes, counts)
    for b in range(counts.shape[0]):
        rows, copies = _materialise(counts[b], groups)
        h, m = human[rows], metric[rows]
        assert pearson[b] == pytest.approx(scipy.stats.pearsonr(m, h).statistic)
        assert spearman[b] == pytest.approx(scipy.stats.spearmanr(m, h).statistic)
        assert pairs["kendall_tau_b"][b] == pytest.approx(
            scipy.stats.kendalltau(m, h, variant="b").statistic)
        assert pairs["kendall_tau_c"][b] == pytest.approx(
            scipy.stats.kendalltau(m, h, variant="c").statistic)
        assert pairs["pairwise_accuracy"][b] == pytest.approx(
            _brute_accuracy(h, m, 0.0, origin=rows))
        assert pairs["pairwise_accuracy_tc"][b] == pytest.approx(
            _brute_accuracy(h, m, 0.5, origin=rows))
        assert darr[b] == pytest.approx(stats.tau_darr(h, m, copies))
        assert mean_tau[b] == pytest.approx(
            np.nanmean(stats.per_group("kendall_tau_b", h, m, copies)))
        np.testing.assert_allclose(means[b], stats.system_means(m, systems[rows]))


def test_a_metric_that_ties_every_pair_has_its_accuracy_inside_its_interval():
    """acc23 of a constant metric is the share of human-tied pairs; a row and its copy in a
    resample are no pair (counted as agreeing ties, they put the whole interval above it)."""
    rng = np.random.default_rng(8)
    groups = np.repeat(np.arange(40), 4)
    human = rng.permutation(np.arange(160) // 2).astype(float)  # 80 tied pairs of 12720
    flat = np.zeros(160)
    estimate = stats.pairwise_accuracy(human, flat)
    assert estimate == pytest.approx(80 / (160 * 159 / 2))
    counts = stats.group_bootstrap_counts(40, 2000, seed=1)
    _, codes = stats.group_codes(groups)
    resampled = stats.bootstrap_pair_statistics(human, flat, codes, counts)["pairwise_accuracy"]
    low, high = np.percentile(resampled, [2.5, 97.5])
    assert low <= estimate <= high
    assert np.mean(resampled) == pytest.approx(estimate, rel=0.1)


def test_a_permutation_test_of_an_undefined_statistic_has_no_p_value():
    """Humans tie every pair of each task: tau_darr is undefined, so no p-value, not 1/(n+1)."""
    rng = np.random.default_rng(0)
    tasks = np.repeat(np.arange(8), 3)
    human = np.repeat(rng.integers(0, 5, 8), 3).astype(float)
    batch = stats.batch_statistic("within_task", "tau_darr", human, tasks)
    p, delta, deltas = stats.perm_both(batch, human + rng.normal(0, 0.5, 24),
                                       rng.normal(size=24), 99, seed=0)
    assert np.isnan(p) and np.isnan(delta) and np.isnan(deltas).all()


def test_grouped_tie_calibration_returns_the_smallest_maximiser():
    """Per-group weights (1/pairs) summed in two orders differ in their last bits; the
    smallest epsilon of the equal best accuracies wins (found by a search in exact fractions)."""
    human = np.array([2, 0, 1, 0, 2, 2, 2], float)
    metric = np.array([3, 1, 0, 3, 1, 3, 3], float)
    groups = np.repeat(["a", "b"], [5, 2])

    def exact(epsilon: float) -> Fraction:
        per = []
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            pairs = list(itertools.combinations(rows, 2))
            right = sum(np.sign(human[i] - human[j]) == (
                0 if abs(metric[i] - metric[j]) <= epsilon else np.sign(metric[i] - metric[j]))
                for i, j in pairs)
            per.append(Fraction(int(right), len(pairs)))
        return sum(per) / len(per)

    candidates = [0.0, 1.0, 2.0, 3.0]
    best = max(exact(e) for e in candidates)
    epsilon, accuracy = stats.tie_calibration(human, metric, groups)
    assert epsilon == min(e for e in candidates if exact(e) == best)
    assert accuracy == pytest.approx(float(best))


def test_krippendorff_alpha_of_one_value_everywhere_is_undefined():
    assert np.isnan(stats.krippendorff_alpha(np.array([[2.0, 2.0, np.nan], [2.0, 2.0, 2.0]])))


def test_weighted_statistic_equals_repeated_rows():
    rng = np.random.default_rng(6)
    x, y = rng.integers(0, 4, 10).astype(float), rng.integers(0, 3, 10).astype(float)
    weights = rng.integers(0, 3, (5, 10)).astype(float)
    for name, function in (("pearson", scipy.stats.pearsonr), ("spearman", scipy.stats.spearmanr)):
        got = stats.weighted_statistic(name, x, y, weights)
        for b in range(5):
            rows = np.repeat(np.arange(10), weights[b].astype(int))
            assert got[b] == pytest.approx(function(x[rows], y[rows]).statistic)


def test_percentile_and_difference_intervals():
    values = np.r_[np.arange(101.0), np.nan]
    assert stats.percentile_ci(values, 0.9) == pytest.approx((5.0, 95.0))
    a, b = np.arange(101.0), np.zeros(101)
    assert stats.bootstrap_difference_ci(a, b, 0.9) == pytest.approx((5.0, 95.0))
    with pytest.raises(ValueError, match="same resamples"):
        stats.bootstrap_difference_ci(a, b[:5])


# ---- significance -----------------------------------------------------------------------------

def _williams_graham_baldwin(r12, r13, r23, n):
    """Graham & Baldwin (2014) eq. 1, with K as the determinant of the correlation matrix."""
    k = np.linalg.det(np.array([[1, r12, r13], [r12, 1, r23], [r13, r23, 1]]))
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / np.sqrt(
        2 * k * (n - 1) / (n - 3) + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3)
    return 1 - scipy.stats.t.cdf(t, n - 3)


@pytest.mark.parametrize("r12, r13, r23, n", [(0.6, 0.5, 0.7, 100), (0.45, 0.5, 0.3, 30),
                                              (0.9, 0.85, 0.95, 500), (0.2, 0.1, -0.2, 10)])
def test_williams_matches_graham_baldwin_formula(r12, r13, r23, n):
    p = stats.williams_test(r12, r13, r23, n)
    assert p == pytest.approx(_williams_graham_baldwin(r12, r13, r23, n), rel=1e-9)
    assert p + stats.williams_test(r13, r12, r23, n) == pytest.approx(1.0)


def test_williams_of_two_metrics_one_up_to_a_linear_map_is_nan_without_warning():
    """The statistic is 0/0 there; rounding once gave NaN, 0.5 or p = 5e-151 at random."""
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(200):
            human, a = rng.normal(size=40), rng.normal(size=40)
            b = 3.7 * a + 0.3
            for function in (stats.pearson, stats.spearman):
                r = (function(a, human), function(b, human), function(a, b))
                assert math.isnan(stats.williams_test(*r, 40)), r
        assert math.isnan(stats.williams_test(0.1, 0.1, 1.0, 30))  # K rounds below 0 here


def test_williams_rejects_tiny_samples():
    with pytest.raises(ValueError, match="more than 3"):
        stats.williams_test(0.5, 0.4, 0.3, 3)


def _fixture_for_perm(seed, n_groups=3, size=3):
    rng = np.random.default_rng(seed)
    n = n_groups * size
    human = rng.integers(0, 4, n).astype(float)
    a = human + rng.normal(0, 0.8, n)
    b = human + rng.normal(0, 1.6, n)
    groups = np.repeat(np.arange(n_groups), size).astype(str)
    systems = np.tile(np.arange(size), n_groups).astype(str)
    return human, a, b, groups, systems


@pytest.mark.parametrize("level, statistic", [("item", "pearson"), ("item", "spearman"),
                                              ("within_task", "tau_darr"),
                                              ("system", "pearson"), ("system", "spearman")])
def test_perm_both_matches_exhaustive_enumeration(level, statistic):
    human, a, b, groups, systems = _fixture_for_perm(7, size=9 if level == "system" else 3)
    batch = stats.batch_statistic(level, statistic, human, groups, systems)
    if level == "system":  # (it swaps whole systems: their means)
        a, b = stats.system_means(a, systems), stats.system_means(b, systems)
    za, zb = stats.zscore(a), stats.zscore(b)
    delta = batch(za)[0] - batch(zb)[0]
    swaps = np.array(list(itertools.product([False, True], repeat=a.size)))
    exhaustive = batch(np.where(swaps, zb, za)) - batch(np.where(swaps, za, zb))
    exact = np.mean(exhaustive >= delta - 1e-12)
    p, got_delta, _ = stats.perm_both(batch, a, b, 2 ** a.size, seed=11)  # every pattern
    assert got_delta == pytest.approx(delta) and p == exact
    n = 2 ** a.size - 1  # fewer than the patterns: drawn at random
    p, _, deltas = stats.perm_both(batch, a, b, n, seed=11)
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / n) + 2 / n
    assert p == (np.count_nonzero(deltas >= got_delta - 1e-12) + 1) / (n + 1)
    assert stats.perm_both(batch, a, b, 50, seed=11)[0] == stats.perm_both(batch, a, b, 50, 11)[0]


@pytest.mark.parametrize("level, statistic", [("item", "pearson"), ("item", "spearman"),
                                              ("within_task", "tau_darr"),
                                              ("within_task", "pearson")])
def test_perm_both_with_blocks_swaps_each_block_whole(level, statistic):
    """With ``blocks`` (each row's task), a swap pattern is one per task: every pattern of the
    4 tasks, each expanded to its rows, gives the exact p; random draws agree with it; and a
    block per row is the test without blocks, draw for draw."""
    human, a, b, groups, systems = _fixture_for_perm(5, n_groups=4, size=3)
    _, blocks = stats.group_codes(groups)
    batch = stats.batch_statistic(level, statistic, human, groups, systems, 0.0, True)
    za, zb = stats.zscore(a), stats.zscore(b)
    delta = batch(za)[0] - batch(zb)[0]
    patterns = np.array(list(itertools.product([False, True], repeat=4)))[:, blocks]
    exhaustive = batch(np.where(patterns, zb, za)) - batch(np.where(patterns, za, zb))
    exact = np.mean(exhaustive >= delta - 1e-12)
    p, got_delta, deltas = stats.perm_both(batch, a, b, 16, seed=3, blocks=blocks)
    assert got_delta == pytest.approx(delta) and p == exact and p >= 1 / 16
    np.testing.assert_allclose(np.sort(deltas), np.sort(exhaustive), atol=1e-12)
    p, _, deltas = stats.perm_both(batch, a, b, 15, seed=3, blocks=blocks)  # drawn
    assert p == (np.count_nonzero(deltas >= got_delta - 1e-12) + 1) / 16
    assert set(np.round(deltas, 9)) <= set(np.round(exhaustive, 9))  # (only those patterns)
    rows = np.arange(a.size)
    assert (stats.perm_both(batch, a, b, 300, seed=4, blocks=rows)[0]
            == stats.perm_both(batch, a, b, 300, seed=4)[0])
    with pytest.raises(ValueError, match="block code"):
        stats.perm_both(batch, a, b, 30, seed=4, blocks=groups)


def test_item_perm_both_holds_its_level_when_a_task_s_rows_share_an_error():
    """Two metrics equally good, each with an error of its own shared by a task's rows (a
    task's references): rows swapped one by one reject more often than the level (the shared
    error counts as evidence: 8.8-10.1% over seeds 0-4), whole tasks swapped about as often
    (5.1-6.0%)."""
    rng = np.random.default_rng(0)
    n_tasks, size, n_sims = 50, 5, 1000
    tasks = np.repeat(np.arange(n_tasks), size)
    rejected = {"rows": 0, "tasks": 0}
    for _ in range(n_sims):
        quality = np.repeat(rng.normal(size=n_tasks), size) + rng.normal(size=tasks.size)
        human = quality + rng.normal(scale=0.7, size=tasks.size)
        a, b = (quality + np.repeat(rng.normal(scale=0.8, size=n_tasks), size)
                + rng.normal(scale=0.8, size=tasks.size) for _ in range(2))
        batch = stats.batch_statistic("item", "pearson", human)
        seed = int(rng.integers(1 << 30))
        rejected["rows"] += stats.perm_both(batch, a, b, 200, seed)[0] < 0.05
        rejected["tasks"] += stats.perm_both(batch, a, b, 200, seed, tasks)[0] < 0.05
    margin = 2.5 * np.sqrt(0.05 * 0.95 / n_sims)
    assert rejected["tasks"] / n_sims < 0.05 + margin < 0.075 < rejected["rows"] / n_sims, (
        rejected)


def test_a_metric_constant_in_a_task_the_humans_score_apart_counts_zero():
    """By hand: task a (humans 1, 2, 3; metric 5, 5, 5) is 0, task b (humans 1, 2, 3; metric
    1, 3, 2) keeps its Pearson 0.5, task c (humans 2, 2, 2) stays undefined (no metric can
    agree with ratings that never differ), and pairwise accuracy, defined anyway, is kept."""
    human = np.array([1.0, 2, 3, 1, 2, 3, 2, 2, 2])
    metric = np.array([5.0, 5, 5, 1, 3, 2, 1, 2, 3])
    groups = np.repeat(["a", "b", "c"], 3)
    per_task = stats.per_group("pearson", human, metric, groups)
    assert np.isnan(per_task[[0, 2]]).all() and per_task[1] == pytest.approx(0.5)
    filled = stats.constant_metric_as_zero(per_task, human, metric, groups)
    np.testing.assert_allclose(filled[:2], [0.0, 0.5])
    assert np.isnan(filled[2])
    accuracy = stats.per_group("pairwise_accuracy", human, metric, groups)
    np.testing.assert_array_equal(
        stats.constant_metric_as_zero(accuracy, human, metric, groups), accuracy)
    np.testing.assert_array_equal(stats.varies_per_group(metric, groups), [False, True, True])
    batch = stats.batch_statistic("within_task", "pearson", human, groups, None, 0.0, True)
    assert batch(metric)[0] == pytest.approx(0.25)
    skipping = stats.batch_statistic("within_task", "pearson", human, groups)
    assert skipping(metric)[0] == pytest.approx(0.5)


@pytest.mark.parametrize("level, statistic", [("item", "pearson"), ("item", "spearman"),
                                              ("within_task", "tau_darr"),
                                              ("within_task", "spearman")])
def test_batch_fast_paths_equal_direct_statistics(level, statistic):
    human, metric, groups = _data(8, n_groups=6, size=4)
    other = np.round(human * 0.5 + np.random.default_rng(9).normal(0, 1, human.size), 1)
    systems = np.tile(["p", "q", "r", "s"], 6)
    batch = stats.batch_statistic(level, statistic, human, groups, systems)
    swap = np.random.default_rng(10).random((7, metric.size)) < 0.5
    fast = batch.swapped(metric, other, swap)
    mixed = np.where(swap, other, metric)
    np.testing.assert_allclose(fast, batch(mixed), atol=1e-10)
    for row, value in zip(mixed, fast, strict=True):
        if level == "item":
            expected = stats.POINT_STATISTICS[statistic](row, human)
        elif statistic == "tau_darr":
            expected = stats.tau_darr(human, row, groups)
        else:
            expected = np.nanmean(stats.per_group(statistic, human, row, groups))
        assert value == pytest.approx(expected)


def test_system_level_perm_both_holds_its_level_on_random_ratings():
    """Ratings that no metric predicts, two metrics that rank the systems differently: the
    system-level test rejects about as often as its level says (swapping rows and averaging
    them per system rejected 61% of such differences at 0.05)."""
    rng = np.random.default_rng(0)
    n_tasks, n_systems, rejected, n_sims = 30, 8, 0, 200
    systems = np.tile(np.arange(n_systems), n_tasks).astype(str)
    quality = rng.normal(0, 1, (2, n_systems))  # each metric's own view of the systems
    for _ in range(n_sims):
        human = rng.normal(0, 1, systems.size)
        a = quality[0][systems.astype(int)] + rng.normal(0, 1, systems.size)
        b = quality[1][systems.astype(int)] + rng.normal(0, 1, systems.size)
        batch = stats.batch_statistic("system", "pearson", human, None, systems)
        means = (stats.system_means(a, systems), stats.system_means(b, systems))
        p = stats.perm_both(batch, *means, 200, seed=int(rng.integers(1 << 30)))[0]
        rejected += p < 0.05
    assert rejected / n_sims < 0.05 + 3 * np.sqrt(0.05 * 0.95 / n_sims), rejected


def test_batch_statistic_rejects_unknown_combinations():
    with pytest.raises(ValueError, match="no batch form"):
        stats.batch_statistic("item", "kendall_tau_b", np.arange(5.0))


def test_holm_equals_statsmodels():
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.005, 0.04])
    np.testing.assert_allclose(stats.holm(p), multipletests(p, method="holm")[1])
    with_nan = stats.holm([0.02, np.nan, 0.01])
    assert np.isnan(with_nan[1])
    np.testing.assert_allclose(with_nan[[0, 2]], multipletests([0.02, 0.01], method="holm")[1])


# ---- inter-rater agreement --------------------------------------------------------------------

def test_krippendorff_alpha_published_examples():
    nan = np.nan
    # the krippendorff package's docstring example
    data = [[nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
            [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
            [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4]]
    assert round(stats.krippendorff_alpha(np.array(data), "interval"), 6) == 0.810845
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 coders x 12 units
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    assert round(stats.krippendorff_alpha(np.array(data), "ordinal"), 3) == 0.815
    assert round(stats.krippendorff_alpha(np.array(data), "interval"), 3) == 0.849
    with pytest.raises(ValueError, match="level must be"):
        stats.krippendorff_alpha(np.array(data), "nominal")
    with pytest.raises(ValueError, match="two or more raters"):
        stats.krippendorff_alpha(np.array([[1.0, nan], [nan, 2.0]]))


def test_rater_vs_rest_and_leave_one_rater_out():
    nan = np.nan
    data = np.array([[1, 2, 3, nan, 4],
                     [2, 2, nan, 1, 3],
                     [3, nan, 1, nan, 5]], float)
    rater, unit, own, rest = stats.rater_vs_rest(data)
    cells = {(int(r), int(u)): (o, s) for r, u, o, s in zip(rater, unit, own, rest, strict=True)}
    assert cells[(0, 0)] == (1.0, 2.5)
    assert cells[(1, 1)] == (2.0, 2.0)
    assert cells[(2, 2)] == (1.0, 3.0)
    assert (1, 3) not in cells  # unit 3 has one rating only
    assert len(cells) == 10
    result = stats.leave_one_rater_out(data, "pearson")
    assert set(result) == {0, 1, 2}
    n0, r0 = result[0]
    assert n0 == 4
    assert r0 == pytest.approx(scipy.stats.pearsonr([1, 2, 3, 4], [2.5, 2.0, 1.0, 4.0]).statistic)


def test_system_means_of_the_same_values_in_another_order_tie():
    """Summed in the table's order, 0.1, 0.2 and 0.3 came to 0.20000000000000004 for one system
    and 0.19999999999999998 for another (three 0.2: 0.20000000000000004): a tie split apart, or
    a constant side that varied and got a correlation."""
    values = np.array([0.1, 0.2, 0.3, 0.3, 0.2, 0.1, 0.2, 0.2, 0.2])
    systems = np.array(list("AAABBBCCC"))
    means = stats.system_means(values, systems)
    assert means.tolist() == [0.2, 0.2, 0.2]
    assert math.isnan(stats.POINT_STATISTICS["pearson"](means, np.array([1.0, 2.0, 3.0])))
    codes = np.tile(np.arange(3), 3)  # (each system's rows in tasks 0, 1 and 2)
    system_codes = np.repeat(np.arange(3), 3)
    resampled = stats.bootstrap_system_means(values, codes, system_codes, np.ones((2, 3)))
    assert resampled.tolist() == [[0.2, 0.2, 0.2]] * 2


def test_rounding_keeps_significant_digits_of_the_values_whatever_their_size():
    """12 significant digits of the largest value: 11 decimals for 4, 17 for 1e-6, 12 for 0.3;
    values as they are where the largest is 0 or too small for its power of ten (1e-300)."""
    third = np.array([4 / 3, 4e-6 / 3, 0.1234567890123456])
    assert stats.round_significant(third, 4.0, 12)[0] == round(4 / 3, 11)
    assert stats.round_significant(third, 1e-6, 12)[1] == round(4e-6 / 3, 17)
    assert stats.round_significant(third, 0.3, 12)[2] == 0.123456789012
    tiny = np.array([1e-300 / 3, 0.0])
    assert stats.round_significant(tiny, 1e-300, 12).tolist() == tiny.tolist()
    assert stats.round_significant(third, 0.0, 12) is third


def test_system_means_on_a_tiny_scale_keep_their_digits_and_settle_noise_at_zero():
    """Means of values of 1e-7 keep 12 significant digits (rounded to 11 decimals they kept ~4,
    and two systems 1e-9 apart in relative terms tied), and means of values that cancel are 0
    exactly, not a unit in the last place of 0.1 either side."""
    values = 1e-7 * np.array([1, 1, 1.000000001, 1, 1, 1]) / 3
    means = stats.system_means(values, np.array(list("AAABBB")))
    assert means[0] != means[1]
    np.testing.assert_allclose(means, [values[:3].mean(), values[3:].mean()], rtol=1e-11)
    cancel = np.array([0.1, 0.2, -0.3, -0.1, -0.2, 0.3])
    assert [sum(cancel[:3]), sum(cancel[3:])] != [0.0, 0.0]
    assert stats.system_means(cancel, np.array(list("AAABBB"))).tolist() == [0.0, 0.0]


def test_shown_decimals_match_a_unit_scale_s_three():
    """As finely for its size as 3 decimals show 0 to 1: 3 on 0-4 and 0-100 (never fewer), 4
    on 0-0.5, 9 on 0-1e-6, 3 where there is no number."""
    assert [stats.shown_decimals(x) for x in (1, 4, 100, 0.5, 1e-6, 0.0, math.nan)] == [
        3, 3, 3, 4, 9, 3, 3]


def test_the_rest_of_the_raters_mean_the_same_in_any_order():
    """The others' mean of the same grades, whoever gave them, is one value, a tie: summed in
    the raters' order and less the rater's own, {0.2, 0.3} came out as 0.25000000000000006 in
    one unit and 0.25 in another, {0.1, 0.2} as 0.15000000000000005 and 0.15."""
    data = np.array([[0.1, 0.3, 0.1], [0.3, 0.2, 0.4], [0.2, 0.1, 0.5]])
    rater, unit, own, rest = stats.rater_vs_rest(data)
    cells = {(int(r), int(u)): s for r, u, s in zip(rater, unit, rest, strict=True)}
    assert cells[(0, 0)] == cells[(2, 1)] == 0.25  # others 0.2 and 0.3
    assert cells[(0, 1)] == cells[(1, 0)] == (0.1 + 0.2) / 2  # others 0.1 and 0.2
    assert cells[(1, 1)] == cells[(2, 0)] == 0.2  # others 0.1 and 0.3


# ---- published numbers ------------------------------------------------------------------------

def test_reproduce_tables_matches_published_numbers(shared_data, capsys):
    """analysis/reproduce_tables.py: CodeBERTScore Table 1 within 0.01, ICE-Score exactly."""
    path = Path(__file__).resolve().parents[1] / "analysis" / "reproduce_tables.py"
    spec = importlib.util.spec_from_file_location("reproduce_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.codebertscore_table1(shared_data)
    assert module.ice_conala(shared_data)
    assert module.ice_humaneval(shared_data)
    printed = capsys.readouterr().out
    assert "chrF                                 ours 0.473 0.641 0.624" in printed
    assert "DIFFERS" not in printed


def test_corrected_resampled_t_by_hand():
    """Nadeau & Bengio's correction by hand: d = 0.1, 0.2, 0.3, 0.4 over J = 4 splits, 5 folds
    (n_test/n_train = 1/4): mean 0.25, var 0.05/3, t = 0.25 / sqrt((1/4 + 1/4) 0.05/3) =
    sqrt(7.5), on 3 degrees of freedom; the plain t-test's would be sqrt(15), larger."""
    t, p = stats.corrected_resampled_t(np.array([0.1, 0.2, 0.3, 0.4]), 1 / 4)
    assert t == pytest.approx(math.sqrt(7.5))
    assert p == pytest.approx(scipy.stats.t.sf(math.sqrt(7.5), 3))
    plain = scipy.stats.ttest_1samp([0.1, 0.2, 0.3, 0.4], 0.0, alternative="greater")
    assert plain.statistic == pytest.approx(math.sqrt(15)) and plain.pvalue < p
    assert stats.corrected_resampled_t(np.array([-0.4, -0.3, -0.2, -0.1]), 1 / 4)[1] == \
        pytest.approx(1 - p)
    for flat in ([0.2], [0.1, 0.1, 0.1]):  # one split, or none that differs: no test
        assert all(math.isnan(v) for v in stats.corrected_resampled_t(np.array(flat), 0.25))
    with pytest.raises(ValueError, match="test_to_train"):
        stats.corrected_resampled_t(np.array([0.1, 0.2]), 0.0)


def test_mean_rating_reliability_by_hand_and_against_a_simulated_true_score():
    """Spearman-Brown with the harmonic mean of the raters per unit, by hand; and, on units
    rated by 1 or 8 raters of a known true score, the square root of the reliability is the
    correlation of the true score with the mean ratings (an arithmetic mean of the raters,
    4.5, would give 0.905, the harmonic one's 0.800)."""
    assert stats.mean_rating_reliability(0.5, np.array([2, 2])) == pytest.approx((2.0, 2 / 3))
    assert stats.mean_rating_reliability(0.5, np.array([1, 3])) == pytest.approx((1.5, 0.6))
    assert stats.mean_rating_reliability(0.3, np.array([4]))[1] == pytest.approx(1.2 / 1.9)
    assert math.isnan(stats.mean_rating_reliability(math.nan, np.array([2]))[1])
    with pytest.raises(ValueError, match="at least one rating"):
        stats.mean_rating_reliability(0.5, np.array([0, 2]))
    rng = np.random.default_rng(0)
    n, raters = 4000, 8
    truth = rng.normal(size=n)
    counts = np.where(rng.random(n) < 0.5, 1, raters)
    matrix = np.full((raters, n), np.nan)
    for rater in range(raters):
        rows = rater < counts
        matrix[rater, rows] = np.round(truth[rows] + rng.normal(size=rows.sum()), 1)
    alpha = stats.krippendorff_alpha(matrix, "interval")
    assert alpha == pytest.approx(0.5, abs=0.03)  # (one grade: half truth, half noise)
    k, reliability = stats.mean_rating_reliability(alpha, counts)
    assert k == pytest.approx(n / np.sum(1 / counts))
    observed = np.corrcoef(truth, np.nanmean(matrix, axis=0))[0, 1]
    assert observed == pytest.approx(math.sqrt(reliability), abs=0.02)
    assert observed == pytest.approx(0.8, abs=0.02)


def test_two_way_reliability_by_shrout_and_fleiss_and_against_simulated_true_scores():
    """ICC(3,k) of Shrout & Fleiss (1979), Table 2 (6 targets, 4 judges): 0.91, on any scale;
    and, on raters of their own leniency who grade every unit, all but one, or 3 of 6 at
    random, its square root is the correlation of the true score with the mean ratings, where
    Spearman-Brown of alpha, which counts leniency as error, is below it. None where the design
    does not tell leniency from the units: raters who each grade one unit, or two groups of
    raters that share no unit."""
    table = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9],
                      [6, 2, 4, 7]], float).T  # (judges x targets)
    assert round(stats.two_way_reliability(table), 2) == 0.91
    for factor in (1e-200, 1e200):
        assert stats.two_way_reliability(table * factor) == pytest.approx(
            stats.two_way_reliability(table))
    rng = np.random.default_rng(0)
    n, raters = 2000, 6
    for design in ("all", "all but one", "3 of 6"):
        truth = rng.normal(size=n)
        grades = (truth[None, :] + np.array([[-1.0], [-0.5], [0.0], [0.3], [0.8], [1.2]])
                  + rng.normal(size=(raters, n)))
        if design == "all but one":
            grades[0, 0] = np.nan
        if design == "3 of 6":
            for unit in range(n):
                grades[rng.choice(raters, 3, replace=False), unit] = np.nan
        reliability = stats.two_way_reliability(grades)
        observed = np.corrcoef(truth, np.nanmean(grades, axis=0))[0, 1]
        assert math.sqrt(reliability) == pytest.approx(observed, abs=0.01), design
        alpha = stats.krippendorff_alpha(np.round(grades, 1), "interval")
        _, spearman_brown = stats.mean_rating_reliability(alpha, np.isfinite(grades).sum(0))
        assert math.sqrt(spearman_brown) < observed - 0.02, design
    one_each = np.full((8, 4), np.nan)
    one_each[np.arange(8), np.arange(8) // 2] = 1.0 + np.arange(8)
    assert stats.two_way_reliability(one_each) is None
    apart = np.full((4, 6), np.nan)
    apart[:2, :3], apart[2:, 3:] = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    assert stats.two_way_reliability(apart) is None
    # two groups of raters linked through one grade: their leniencies apart rest on it
    truth = rng.normal(size=100)
    bridged = truth[None, :] + rng.normal(0, 0.7, size=(6, 1)) + rng.normal(size=(6, 100))
    bridged[:3, 50:], bridged[3:, :50] = np.nan, np.nan
    bridged[0, 50] = truth[50] + rng.normal()
    assert stats.two_way_reliability(bridged) is None
    # a rater with no grade changes nothing
    assert stats.two_way_reliability(np.vstack([table, np.full(6, np.nan)])) == pytest.approx(
        stats.two_way_reliability(table))
    with pytest.raises(ValueError, match="at least one rating"):
        stats.two_way_reliability(np.array([[1.0, np.nan], [2.0, np.nan]]))


def test_sums_that_overflow_are_taken_over_a_power_of_two_each_row_alone():
    """Scores whose sum overflows (1e307) are scaled exactly (by a power of two) before they are
    summed: the mean is the one exact arithmetic gives, a Pearson r the one of the values as
    they are, and a task of tiny values in a column of huge ones keeps its own within-task r (a
    scale shared by the whole column took it to nan)."""
    huge = np.array([1e307, 3e307, 5e307, 7e307])
    exact = sum(Fraction(value) for value in huge) / 4  # (of the doubles as stored)
    assert stats.mean(huge) == pytest.approx(float(exact), rel=1e-15)
    assert stats.mean(huge / 1e307) == np.mean(huge / 1e307)  # (no overflow: numpy's own)
    assert stats.mean(np.array([1, 0, 1, 1, 0, 1, 1], bool)) == 5 / 7  # (as floats, not float16)
    human = np.array([1.0, 2.0, 4.0, 3.0])
    assert stats.pearson(huge, human) == pytest.approx(stats.pearson(huge / 1e307, human),
                                                       abs=1e-15)
    rng = np.random.default_rng(0)
    metric = np.r_[rng.uniform(1e306, 1e307, 200), [1e-200, 2e-200, 3e-200, 5e-200]]
    ratings = np.r_[rng.uniform(0, 4, 200), [1.0, 2.0, 3.0, 4.0]]
    tasks = np.repeat(np.arange(51), 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        within = stats.per_group("pearson", ratings, metric, tasks)
    assert within[-1] == pytest.approx(scipy.stats.pearsonr([1, 2, 3, 5], [1, 2, 3, 4])[0],
                                       abs=1e-12)
    assert np.isfinite(within).all()
