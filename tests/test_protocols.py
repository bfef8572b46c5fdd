"""The CodeBERTScore fold protocol, as its authors' script wrote it."""

from __future__ import annotations

import numpy as np
import pytest

from hybridmetric import stats
from hybridmetric.protocols import CONALA_CV_SUBSETS, codebertscore_protocol, fold_problems


def test_test_folds_are_bitwise_not_mirrors_not_complements():
    # ~0 = -1 -> problem 4, ~2 = -3 -> problem 2: mirrored from the end of the list.
    assert fold_problems(np.array([0, 2]), 5, "test").tolist() == [4, 2]
    assert fold_problems(np.array([0, 2]), 5, "dev").tolist() == [0, 2]
    assert CONALA_CV_SUBSETS.shape == (5, 100)
    with pytest.raises(ValueError, match="split"):
        fold_problems(np.array([0]), 5, "train")


def test_protocol_is_the_fold_mean_of_the_statistics():
    rng = np.random.default_rng(0)
    problem = np.repeat(np.arange(6), 3)
    human, metric = rng.integers(0, 5, 18).astype(float), rng.random(18)
    subsets = np.array([[0, 1, 2], [3, 4, 5]])
    got = codebertscore_protocol(human, metric, problem, "dev", subsets)
    folds = []
    for subset in subsets:
        rows = np.isin(problem, subset)
        folds.append((stats.tau_darr(human[rows], metric[rows], problem[rows], 0.001,
                                     inclusive=False),
                      stats.pearson(metric[rows], human[rows]),
                      stats.spearman(metric[rows], human[rows])))
    np.testing.assert_allclose(got, np.mean(folds, axis=0))
