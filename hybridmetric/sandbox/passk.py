"""The unbiased pass@k estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
on Code", arXiv 2107.03374, section 2.1): ``1 - C(n - c, k) / C(n, k)``."""

from __future__ import annotations

import numpy as np


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
