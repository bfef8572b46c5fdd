"""Published evaluation protocols, reproduced exactly so that our numbers compare like with like.

CodeBERTScore (Zhou et al. 2023, arXiv 2302.05527), Table 1 on CoNaLa: tau is the within-problem
da-RR variant B (threshold 0.001, strict; :func:`hybridmetric.stats.tau_darr`), Pearson and
Spearman pool the rows of the evaluated problems, and the reported number is the mean over 5 folds
of their ``evaluation/constants.py``. Their "test" folds are ``scores[~subset]``: ``~`` on an
integer array is bitwise NOT (``-i - 1``), so each "test" fold is the 100 problems mirrored from
the end of the list, not the complement of the dev fold. This module reproduces that as written;
our own audit (:mod:`hybridmetric.audit`) uses bootstrap CIs over all problems instead.
"""

from __future__ import annotations

import numpy as np

from hybridmetric import stats

# neulab/code-bert-score evaluation/constants.py, CONALA_CV_SUBSETS (5 folds x 100 problems).
CONALA_CV_SUBSETS = np.array([
    [224, 421, 392, 380, 414, 437, 76, 20, 2, 174, 240, 355, 303, 230, 326, 328, 233, 116, 340,
     291, 425, 186, 24, 46, 74, 81, 283, 58, 360, 4, 246, 465, 356, 217, 431, 25, 214, 169, 238,
     412, 390, 204, 144, 409, 191, 69, 37, 279, 298, 407, 29, 118, 88, 222, 314, 90, 466, 251,
     415, 23, 22, 450, 158, 363, 145, 227, 387, 454, 128, 180, 15, 249, 268, 396, 339, 468, 234,
     6, 252, 402, 197, 42, 167, 153, 143, 63, 71, 470, 1, 105, 388, 209, 36, 416, 208, 205, 138,
     275, 460, 400],
    [310, 293, 371, 40, 351, 111, 117, 270, 177, 253, 420, 407, 53, 327, 462, 65, 402, 334, 262,
     453, 119, 58, 468, 410, 143, 190, 455, 221, 1, 386, 5, 367, 118, 286, 281, 174, 242, 209,
     102, 461, 247, 39, 94, 291, 20, 84, 460, 439, 136, 113, 294, 343, 122, 133, 194, 175, 256,
     359, 218, 35, 171, 305, 135, 274, 436, 85, 92, 30, 414, 2, 165, 240, 107, 466, 184, 295, 248,
     325, 257, 358, 199, 64, 347, 403, 71, 182, 428, 316, 418, 11, 114, 396, 148, 352, 196, 160,
     15, 112, 79, 388],
    [63, 233, 401, 408, 330, 34, 454, 55, 108, 160, 351, 282, 464, 176, 370, 347, 15, 72, 204, 58,
     430, 139, 349, 42, 6, 281, 92, 168, 298, 24, 66, 127, 422, 210, 207, 447, 357, 405, 318, 335,
     448, 128, 470, 208, 85, 388, 163, 36, 200, 166, 425, 167, 371, 54, 355, 239, 416, 201, 194,
     383, 364, 135, 348, 248, 468, 62, 258, 376, 363, 246, 222, 152, 377, 90, 287, 263, 186, 53,
     3, 265, 217, 5, 235, 254, 427, 164, 456, 155, 197, 395, 467, 378, 30, 226, 399, 440, 81, 134,
     404, 129],
    [76, 223, 354, 263, 216, 12, 141, 217, 215, 229, 97, 121, 108, 277, 292, 436, 471, 240, 391,
     400, 337, 470, 32, 455, 244, 91, 316, 59, 281, 266, 225, 325, 234, 24, 178, 81, 434, 9, 386,
     142, 27, 309, 460, 154, 371, 38, 387, 52, 122, 248, 22, 358, 90, 427, 433, 274, 11, 53, 161,
     247, 306, 440, 294, 190, 210, 381, 98, 446, 453, 242, 273, 160, 331, 383, 25, 363, 195, 3,
     334, 459, 10, 438, 28, 441, 435, 416, 405, 347, 37, 171, 34, 404, 196, 6, 445, 268, 328, 115,
     299, 428],
    [59, 250, 223, 346, 276, 174, 456, 329, 248, 9, 277, 87, 469, 240, 75, 366, 438, 190, 404,
     460, 26, 191, 176, 459, 48, 253, 140, 260, 116, 308, 219, 84, 279, 228, 2, 61, 352, 338, 120,
     181, 12, 117, 359, 373, 1, 369, 209, 47, 106, 415, 334, 86, 158, 315, 156, 448, 133, 398,
     303, 203, 342, 74, 189, 358, 392, 95, 247, 32, 171, 399, 319, 381, 333, 374, 97, 417, 54,
     211, 332, 271, 431, 125, 244, 51, 165, 437, 25, 385, 275, 286, 45, 98, 169, 406, 264, 297,
     114, 10, 314, 430],
])



def fold_problems(subset: np.ndarray, n_problems: int, split: str) -> np.ndarray:
    """The problems of one CodeBERTScore fold: ``subset`` (dev) or ``arange(n)[~subset]`` (their
    "test", as written)."""
    if split not in ("dev", "test"):
        raise ValueError(f"split must be 'dev' or 'test', got {split!r}")
    return subset if split == "dev" else np.arange(n_problems)[~subset]


def codebertscore_protocol(human: np.ndarray, metric: np.ndarray, problem: np.ndarray,
                           split: str = "test",
                           subsets: np.ndarray = CONALA_CV_SUBSETS) -> tuple[float, float, float]:
    """Mean (tau_darr, Pearson, Spearman) over the folds, per the CodeBERTScore paper's script."""
    n_problems = int(problem.max()) + 1
    folds = []
    for subset in subsets:
        rows = np.isin(problem, fold_problems(subset, n_problems, split))
        folds.append((stats.tau_darr(human[rows], metric[rows], problem[rows], 0.001,
                                     inclusive=False),
                      stats.pearson(metric[rows], human[rows]),
                      stats.spearman(metric[rows], human[rows])))
    return tuple(float(v) for v in np.mean(folds, axis=0))  # type: ignore[return-value]
