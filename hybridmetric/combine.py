"""The fitted hybrid metric: a small, transparent combiner of scorers, validated on held-out tasks.

Dibia et al. 2022 (arXiv 2210.16494) blended PASS and EDIT-SIM by hand; COMET (Rei et al. 2020)
learns a metric from human scores with a large neural model. Here a linear model over the scorers'
columns is fitted to programmers' value ratings, so its weights say how much each signal matters:

- ``nonneg``: least squares with every weight >= 0 (``scipy.optimize.nnls``), so a scorer can
  never count against value and the output is monotone in every feature;
- ``ridge``: ridge-regularised least squares (``alpha``), weights of any sign;
- ``ordinal``: a cumulative-logit model (McCullagh 1980; statsmodels ``OrderedModel``) of the
  raters' Likert grades; its output is the expected grade;
- ``mixed``: a linear mixed model (statsmodels ``MixedLM``) of the raters' grades with a random
  intercept per rater, so a harsh rater shifts only their own intercept; its output is the fixed
  part, the grade of an average rater.

Features are standardised inside the model (training mean and SD). The output is on the study's
rating scale: clipped to ``scale`` and optionally passed through an isotonic map fitted on the
training predictions (``calibration="isotonic"``).

Validation (:func:`fit_card`) is cross-validation grouped by ``task_id`` (no task is in both a
training and a test fold), repeated with different seeds. On every test fold the held-out Kendall
tau-b, Spearman and Pearson correlation with the target are computed for the hybrid, for every
single feature, and for Dibia's COMBINED, on the same rows (all of the fold's generations
pooled, not the within-task variant of CodeBERTScore's Table 1). By each of those statistics,
the hybrid is compared with the single feature of best mean held-out value, chosen on the same
folds (which favours the feature, not the hybrid), fold by fold, by the corrected resampled
t-test (the folds share training rows). Weight CIs are percentile bootstrap
intervals over tasks (resampling whole tasks with replacement and refitting).

**Missing values.** A feature value or target that is missing (NaN: e.g. no tests for a task) is
never replaced. ``missing="refuse"`` (the default) stops with a message naming the columns, rows
and tasks; fit instead on a feature subset every row has (``features=``, e.g. the reference-free or
test-free scorers), or pass ``missing="drop-rows"`` to fit on the rows that have every chosen
feature and the target (the card records how many rows were dropped). :meth:`MetricCard.apply`
refuses rows with a missing feature too, or with ``missing="nan"`` gives them NaN ("not
applicable", as a scorer does).

**Models trained on raters.** ``ordinal`` and ``mixed`` train on one row per (generation, rater)
from the ``ratings`` column; ``ordinal`` needs integer grades. All models are evaluated against the
per-generation ``target`` (by default the mean rating).

**Card format** (``hybridmetric-card/1``; JSON)::

    format       "hybridmetric-card/1"
    model        "nonneg" | "ridge" | "ordinal" | "mixed";  alpha (ridge penalty; null for others)
    target       the rating column the card was fitted and validated against
    scale        [min, max] of the output; scale_source "given" | "observed"
    features     [{name: "score.chrf", scorer: "chrf", signature, mean, std, distinct}]
                 (training mean/SD, and how many distinct values it takes on those rows)
    weights      {feature: {value, ci: [lo, hi], per_unit, per_unit_ci}}
    weights_units  value/ci: output units (rating points; log-odds for ordinal) per training SD of
                 the feature; per_unit: the same per 1.0 of the raw score. CIs: 95% percentile
                 bootstrap over tasks (bootstrap.n resamples, less bootstrap.skipped on which
                 the model cannot be fitted: mixed, a feature constant in the resample)
    intercept    the output at the training mean of every feature (null for ordinal), to add
                 to sum_j weight_j * z_j, z_j the feature in training SDs from its mean
    intercept_per_unit  the output at raw scores of 0, to add to sum_j per_unit_j * score_j
                 (null for ordinal); either sum, clipped to the scale (or calibrated), is the
                 hybrid (to 12 significant digits: :data:`OUTPUT_DIGITS`)
    ordinal      {levels, cutpoints} (ordinal only): P(grade <= levels[k]) = logistic(cutpoints[k]
                 - sum_j weight_j * z_j); output = expected grade
    rater_sd     SD of the rater intercepts (mixed only)
    calibration  {method: "clip" | "isotonic", points: {x, y} (isotonic only),
                 table: [{lo, hi, n, predicted, observed}]}; the table bins the out-of-fold
                 predictions of the first CV repeat into 10 equal-count bins
    cv           {folds, repeats (1 where there are as many folds as tasks: every repeat
                 would split them alike; ``note`` then says so), grouped_by: "task_id",
                 n_folds_run,
                 hybrid | features[name] | dibia_combined: {kendall|spearman|pearson:
                 {mean, sd (over folds), values (one per fold, in grouped_folds order),
                 undefined (folds where it is undefined)}},
                 comparisons: {kendall|spearman|pearson: {metric, best_feature (the
                 feature of the best mean), best_feature_value, hybrid_value, gain (mean of
                 per-fold hybrid - best, each to 9 decimals), gain_sd, wins (folds where the
                 hybrid is higher),
                 n_folds, beats_best_feature (mean gain > 0), t, p (one-sided, the corrected
                 resampled t-test: stats.corrected_resampled_t)}, all over the folds where
                 both are defined (null where none is); hybrid_folds, best_feature_folds:
                 where each alone is} (a card of before had ``comparison``: Kendall's alone)
                 dibia_combined also names its {pass, edit_sim} columns; it is
                 {"skipped": reason} when a PASS or EDIT-SIM column is absent or incomplete
    training     {sha256, n_rows, n_tasks, n_dropped_rows, n_rater_rows, where, n_table_rows,
                 collinear: [[a, b, r], ...] (features whose |r| on the rows is 0.95 or more)};
                 the hash is hybridmetric.io.frame_hash of the columns task_id, the target, the
                 features (and ratings for rater-trained models), on the rows used; where: the
                 FIELD=VALUE conditions that chose the rows ([]: all of the table's n_table_rows)
    bootstrap    {n, level, skipped}
    seed, versions {package: version}, signature (key:value|... string; its ``content`` field
                 a hash of the rest of the card, :func:`card_content_hash`)

Cards are applied only to scores whose scorer signatures equal those stored for every feature;
a card whose numbers were edited after the fit no longer matches its signature's ``content``,
and is refused as it is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import Ridge
from sklearn.metrics import make_scorer
from sklearn.utils.validation import check_is_fitted, validate_data

from hybridmetric.io import atomic_path, frame_hash
from hybridmetric.progress import progress_bar
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
    rows_meeting,
    score_column,
    where_conditions,
    where_signature,
    where_text,
)
from hybridmetric.signature import changed, environment, signature, visible
from hybridmetric.signature import parse as parse_signature
from hybridmetric.stats import (
    centred,
    corrected_resampled_t,
    largest_abs,
    round_significant,
    shown_decimals,
)

CARD_FORMAT = "hybridmetric-card/1"
MODELS = ("nonneg", "ridge", "ordinal", "mixed")
RATER_MODELS = ("ordinal", "mixed")
CALIBRATIONS = ("none", "isotonic")
#: Dibia et al.'s PASS, in order of preference: all tests pass (0/1), else the fraction passed.
DIBIA_PASS_COLUMNS = (PASS_COLUMN, SCORE_PREFIX + "pass_rate")
DIBIA_EDIT_COLUMN = SCORE_PREFIX + "edit_sim"
CORRELATIONS = ("kendall", "spearman", "pearson")
CALIBRATION_BINS = 10
#: A feature of at most this many distinct values (pass, pass_rate over a few cases, exact
#: match) ties most pairs, which Kendall's tau b leaves out of its denominator.
FEW_VALUES = 10
CI_LEVEL = 0.95
#: Features that correlate at least this much on the training rows are named in the card
#: (``training.collinear``) and by ``fit``: the hybrid cannot tell their weights apart.
COLLINEAR = 0.95
#: Significant digits the hybrid's output keeps (to the decimal of its scale's largest bound:
#: 11 decimals on 0-4): the same value reached by other arithmetic (an intercept or a block
#: mean in another fold's fit, another order of sums) differs in its last bits, which would
#: split ties that rank correlations count (Kendall's tau-b, Spearman's rho).
OUTPUT_DIGITS = 12
#: Keys every card has (see the format above); ``apply`` needs them.
CARD_KEYS = ("model", "alpha", "target", "scale", "features", "weights", "intercept",
             "calibration", "cv", "training", "signature")
VERSIONED_PACKAGES = ("numpy", "pandas", "scipy", "scikit-learn", "statsmodels")


class CardMismatchError(ValueError):
    """A card applied to scores it was not fitted for (other scorer signatures or columns)."""


class DegenerateFitError(ValueError):
    """The model cannot be fitted on these rows (a singular design: constant or collinear
    features)."""


# --------------------------------------------------------------------------- baselines and metrics


def dibia_combined(passed: np.ndarray, edit_sim: np.ndarray) -> np.ndarray:
    """Dibia et al. 2022's COMBINED = min(1, PASS + EDIT-SIM), as we read the paper.

    Code that passes its tests scores 1; code that fails scores its edit similarity, the share of
    the reference a programmer would not have to retype.
    """
    return np.minimum(1.0, np.asarray(passed, dtype=float) + np.asarray(edit_sim, dtype=float))


def dibia_columns(columns: Sequence[str]) -> tuple[str, str] | None:
    """The (PASS, EDIT-SIM) columns COMBINED uses, or None when either is absent."""
    passed = next((c for c in DIBIA_PASS_COLUMNS if c in columns), None)
    if passed is None or DIBIA_EDIT_COLUMN not in columns:
        return None
    return passed, DIBIA_EDIT_COLUMN


def correlations(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Kendall tau-b, Spearman rho and Pearson r of ``x`` with ``y``; NaN where undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "kendall": float(stats.kendalltau(x, y).statistic),
            "spearman": float(stats.spearmanr(x, y).statistic),
            "pearson": float(stats.pearsonr(x, y).statistic) if len(x) > 1 else math.nan,
        }


def _kendall(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return correlations(np.asarray(y_pred), np.asarray(y_true))["kendall"]


#: For ``cross_val_score(..., scoring=kendall_scorer)``: Kendall tau-b of prediction and target.
kendall_scorer = make_scorer(_kendall)


def check_folds(n_groups: int, n_splits: int, n_repeats: int = 1) -> None:
    """ValueError unless ``n_groups`` tasks can fill ``n_splits`` folds, ``n_repeats`` times."""
    if n_splits < 2:
        raise ValueError(f"cross-validation needs at least 2 folds (--folds), got {n_splits}")
    if n_repeats < 1:
        raise ValueError(f"cross-validation needs at least 1 repeat (--repeats), got {n_repeats}")
    if n_groups < 2:
        raise ValueError(f"cross-validation over tasks needs at least 2 distinct tasks (here "
                         f"{n_groups}): fit on more rows")
    if n_groups < n_splits:
        raise ValueError(
            f"{n_groups} distinct tasks cannot fill {n_splits} folds; use fewer folds (--folds)"
        )


def grouped_folds(
    groups: Sequence[Any], n_splits: int = 5, n_repeats: int = 1, seed: int = 0
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Repeated K-fold splits of rows by group: ``(repeat, train_rows, test_rows)``.

    Each repeat shuffles the distinct groups with ``numpy.random.default_rng(seed)`` and deals them
    round-robin into ``n_splits`` folds, so a group's rows are all in one test fold and the folds
    hold near-equal numbers of groups.
    """
    groups = np.asarray(groups)
    unique, inverse = np.unique(groups, return_inverse=True)
    check_folds(len(unique), n_splits, n_repeats)
    rng = np.random.default_rng(seed)
    splits = []
    for repeat in range(n_repeats):
        fold_of_group = np.empty(len(unique), dtype=int)
        fold_of_group[rng.permutation(len(unique))] = np.arange(len(unique)) % n_splits
        fold_of_row = fold_of_group[inverse]
        for fold in range(n_splits):
            test = fold_of_row == fold
            splits.append((repeat, np.flatnonzero(~test), np.flatnonzero(test)))
    return splits


# --------------------------------------------------------------------------- the estimator


def _logistic(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _two_ordered_numbers(bounds: Any) -> bool:
    """Whether ``bounds`` is ``(min, max)``: two numbers (not text, not NaN), min <= max."""
    if isinstance(bounds, str | bytes) or np.ndim(bounds) != 1 or len(bounds) != 2:
        return False
    low, high = bounds
    return (all(isinstance(b, Real) and not isinstance(b, bool) and not math.isnan(b)
                for b in (low, high)) and low <= high)


def _mean_and_sd(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and population SD; where their sums overflow (a feature of 1e300),
    those of the column over its largest magnitude, scaled back: a feature of any finite size
    gets the same weights per SD."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, sd = X.mean(axis=0), X.std(axis=0)
    wide = ~(np.isfinite(mean) & np.isfinite(sd))
    if wide.any():
        unit = np.max(np.abs(X[:, wide]), axis=0)
        scaled = X[:, wide] / unit
        mean[wide], sd[wide] = scaled.mean(axis=0) * unit, scaled.std(axis=0) * unit
    return mean, sd


class HybridMetric(RegressorMixin, BaseEstimator):
    """A scikit-learn regressor combining score columns into one value on the rating scale.

    Parameters
    ----------
    model: ``nonneg`` | ``ridge`` | ``ordinal`` | ``mixed`` (see the module docstring).
    alpha: the ridge penalty (``ridge`` only) on standardised features.
    calibration: ``none`` (clip to ``bounds``) or ``isotonic`` (an increasing map of the training
        predictions onto the target, then clip).
    bounds: ``(min, max)`` of the output; None takes the range of the training target.

    ``fit(X, y, raters=...)`` takes each row's rater for ``mixed``. Fitted: ``mean_``, ``scale_``
    (feature standardisation), ``coef_`` (per SD of each feature), ``intercept_``, ``bounds_``;
    ``levels_`` and ``cutpoints_`` for ``ordinal``; ``rater_sd_`` for ``mixed``; ``iso_x_`` and
    ``iso_y_`` with isotonic calibration. ``score`` is R^2, scikit-learn's regressor convention;
    pass ``scoring=kendall_scorer`` to ``cross_val_score`` for Kendall tau.
    """

    def __init__(
        self,
        model: str = "nonneg",
        alpha: float = 1.0,
        calibration: str = "none",
        bounds: tuple[float, float] | None = None,
    ):
        self.model = model
        self.alpha = alpha
        self.calibration = calibration
        self.bounds = bounds

    def _check_params(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {list(MODELS)}, got {self.model!r}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(
                f"calibration must be one of {list(CALIBRATIONS)}, got {self.calibration!r}"
            )
        if not (isinstance(self.alpha, Real) and not isinstance(self.alpha, bool)
                and math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        if self.bounds is not None and not _two_ordered_numbers(self.bounds):
            raise ValueError(f"bounds must be (min, max), two numbers with min <= max, got "
                             f"{self.bounds!r}")

    def fit(self, X: Any, y: Any, raters: Sequence[Any] | None = None) -> HybridMetric:
        self._check_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        if raters is not None and self.model != "mixed":
            raise ValueError(f"raters are used only by model='mixed', not {self.model!r}")
        self.mean_, scale = _mean_and_sd(X)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        Z = (X - self.mean_) / self.scale_
        if self.model == "nonneg":
            self.intercept_ = float(y.mean())
            self.coef_ = nnls(Z, y - self.intercept_)[0]
        elif self.model == "ridge":
            ridge = Ridge(alpha=float(self.alpha)).fit(Z, y)
            self.coef_, self.intercept_ = ridge.coef_, float(ridge.intercept_)
        elif self.model == "ordinal":
            self._fit_ordinal(Z, y)
        else:
            self._fit_mixed(Z, y, raters)
        if self.bounds is None:  # (ordinal: its grades, as ``y`` holds them)
            self.bounds_ = (float(y.min()), float(y.max()))
        else:
            self.bounds_ = (float(self.bounds[0]), float(self.bounds[1]))
        if self.calibration == "isotonic":
            iso = IsotonicRegression(y_min=self.bounds_[0], y_max=self.bounds_[1],
                                     out_of_bounds="clip").fit(self._raw(Z), y)
            self.iso_x_, self.iso_y_ = iso.X_thresholds_, iso.y_thresholds_
        return self

    def _fit_ordinal(self, Z: np.ndarray, y: np.ndarray) -> None:
        from statsmodels.miscmodels.ordinal_model import OrderedModel

        if not np.all(y == np.round(y)):
            raise ValueError("--model ordinal needs integer grades (Likert classes) as y; "
                             "the mean of several raters is not one: train on each rater's grade")
        levels, codes = np.unique(y, return_inverse=True)
        if len(levels) < 2:
            raise ValueError(f"--model ordinal needs at least 2 distinct grades, got {levels}")
        model = OrderedModel(codes, Z, distr="logit")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = model.fit(method="bfgs", disp=False, maxiter=2000)
        if not result.mle_retvals["converged"]:
            raise RuntimeError("the ordinal model did not converge; check for a feature that "
                               "separates the grades perfectly, or use --model nonneg")
        p = Z.shape[1]
        self.coef_ = np.asarray(result.params[:p], dtype=float)
        self.cutpoints_ = np.asarray(model.transform_threshold_params(result.params)[1:-1])
        self.levels_ = levels
        self.intercept_ = 0.0

    def _fit_mixed(self, Z: np.ndarray, y: np.ndarray, raters: Sequence[Any] | None) -> None:
        import statsmodels.api as sm

        if raters is None:
            raise ValueError("model='mixed' needs fit(X, y, raters=...): each row's rater id")
        raters = np.asarray(raters)
        if len(raters) != len(y):
            raise ValueError(f"raters has {len(raters)} entries for {len(y)} rows")
        if len(np.unique(raters)) < 2:
            raise ValueError("--model mixed needs at least 2 raters; use --model nonneg")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Tried in turn, each from where the last stopped. Not L-BFGS: when the rater
            # variance sits on its boundary (0) it can report convergence at a wrong intercept.
            try:
                result = sm.MixedLM(y, sm.add_constant(Z, has_constant="add"),
                                    groups=raters).fit(reml=True, method=["bfgs", "powell", "nm"])
            except np.linalg.LinAlgError as error:
                raise DegenerateFitError(
                    f"the mixed model cannot be fitted on these rows ({error}): a feature is "
                    "constant or the features are collinear; leave some out (--features) or "
                    "use --model nonneg") from None
        if not result.converged:
            raise RuntimeError("the mixed model did not converge; use --model nonneg")
        fixed = np.asarray(result.fe_params, dtype=float)
        self.intercept_, self.coef_ = float(fixed[0]), fixed[1:]
        self.rater_sd_ = float(np.sqrt(max(float(np.asarray(result.cov_re)[0, 0]), 0.0)))

    def _raw(self, Z: np.ndarray) -> np.ndarray:
        """The uncalibrated output of standardised features."""
        eta = Z @ self.coef_
        if self.model == "ordinal":
            return self._ordinal_probabilities(eta) @ self.levels_
        return self.intercept_ + eta

    def _ordinal_probabilities(self, eta: np.ndarray) -> np.ndarray:
        cumulative = _logistic(self.cutpoints_[None, :] - eta[:, None])
        ones = np.ones((len(eta), 1))
        return np.diff(np.hstack([0.0 * ones, cumulative, ones]), axis=1)

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        raw = self._raw((X - self.mean_) / self.scale_)
        if self.calibration == "isotonic":
            raw = np.interp(raw, self.iso_x_, self.iso_y_)
        return np.clip(round_significant(raw, largest_abs(np.asarray(self.bounds_, float)),
                                         OUTPUT_DIGITS), *self.bounds_)

    def class_probabilities(self, X: Any) -> np.ndarray:
        """P(grade = ``levels_[k]``) per row (``ordinal`` only)."""
        check_is_fitted(self)
        if self.model != "ordinal":
            raise ValueError(f"class_probabilities needs model='ordinal', not {self.model!r}")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._ordinal_probabilities(((X - self.mean_) / self.scale_) @ self.coef_)


def _collinear(X: np.ndarray, columns: Sequence[str]) -> list[list[Any]]:
    """``[a, b, r]`` for each pair of features whose Pearson r on the rows is :data:`COLLINEAR`
    or more in size (r to 3 decimals)."""
    if len(columns) < 2:
        return []
    r = np.corrcoef(centred(X, axis=0), rowvar=False)  # (no square overflows)
    return [[columns[i], columns[j], round(float(r[i, j]), 3)]
            for i in range(len(columns)) for j in range(i + 1, len(columns))
            if abs(r[i, j]) >= COLLINEAR]


# --------------------------------------------------------------------------- data preparation


#: Score columns whose name does not start with the scorer that writes them.
COLUMN_OWNERS = {SCORE_PREFIX + "pass": "pass_rate"}


def scorer_of(column: str, scorer_names: Sequence[str] = ()) -> str:
    """The scorer (or alias) that wrote a ``score.<scorer>[.<part>]`` column.

    Among ``scorer_names`` (e.g. the keys of a signature sidecar) the longest that prefixes the
    column wins, so an alias containing a dot resolves; otherwise the first name segment.
    """
    if not column.startswith(SCORE_PREFIX):
        raise ValueError(f"{column!r} is not a score column (score.<scorer>[.<part>])")
    if column in COLUMN_OWNERS:
        return COLUMN_OWNERS[column]
    rest = column[len(SCORE_PREFIX):]
    matches = [n for n in scorer_names if rest == n or rest.startswith(n + ".")]
    return max(matches, key=len) if matches else rest.split(".", 1)[0]


def feature_columns(frame: pd.DataFrame, features: Sequence[str] | None = None,
                    target: str | None = None) -> list[str]:
    """Resolve feature names (``chrf`` or ``score.chrf``) to columns; None: every score column
    except ``score.hybrid`` and the ``target`` (a score column may be one: a hybrid that saw it
    would predict it perfectly)."""
    available = [c for c in frame.columns
                 if c.startswith(SCORE_PREFIX) and c not in (HYBRID_COLUMN, target)]
    if features is None:
        if not available:
            raise ValueError("the table has no score.* columns; score it first "
                             "(hybridmetric score)")
        return available
    columns = [score_column(f) for f in features]
    if target in columns:
        raise ValueError(f"the target '{target}' is named as a feature too: a hybrid that sees "
                         "its target predicts it perfectly; leave it out of --features")
    unknown = [c for c in columns if c not in available]
    if unknown:
        parts = {c: [a for a in available if a.startswith(c + ".")] for c in unknown}
        hint = "".join(f"; {c} has several columns: name one of {', '.join(p)}"
                       for c, p in parts.items() if p)
        raise ValueError(f"no such feature column(s) {unknown}{hint}; available: {available}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"a feature is named twice in {list(features)}")
    if not columns:
        raise ValueError("no features chosen")
    return columns


def _check_signatures(columns: Sequence[str], scorer_signatures: Mapping[str, str] | None) -> None:
    if scorer_signatures is None:
        raise ValueError("scorer_signatures is required: the card stores each feature's scorer "
                         "signature; scoring.read_scores(path) returns them from the scores' "
                         "sidecar")
    absent = sorted({scorer_of(c, list(scorer_signatures)) for c in columns}
                    - set(scorer_signatures))
    if absent:
        raise ValueError(f"no signature for scorer(s) {absent}; signatures given for "
                         f"{sorted(scorer_signatures)}")


@dataclass
class _Design:
    """Rows to train on (per generation, or per rater grade) and rows to evaluate on."""

    X: np.ndarray  # evaluation rows: one per generation
    y: np.ndarray
    tasks: np.ndarray
    X_train: np.ndarray  # training rows: the same, or one per (generation, rater)
    y_train: np.ndarray
    tasks_train: np.ndarray
    raters: np.ndarray | None


def _design(frame: pd.DataFrame, target: str, columns: list[str], model: str) -> _Design:
    X = frame[columns].to_numpy(dtype=float)
    y = frame[target].to_numpy(dtype=float)
    tasks = frame["task_id"].astype(str).to_numpy()
    if model not in RATER_MODELS:
        return _Design(X, y, tasks, X, y, tasks, None)
    source, grades, raters = [], [], []
    for row, ratings in enumerate(frame["ratings"]):
        for rater, grade in sorted(ratings.items()):
            if model == "ordinal" and float(grade) != round(float(grade)):
                raise ValueError(f"{row_label(frame, row)} (task {frame['task_id'].iloc[row]!r})"
                                 f", rater {rater!r}: the grade {grade!r} is not an integer; "
                                 "--model ordinal needs integer grades (Likert classes); use "
                                 "--model mixed or nonneg")
            source.append(row)
            grades.append(float(grade))
            raters.append(str(rater))
    source = np.asarray(source)
    return _Design(X, y, tasks, X[source], np.asarray(grades), tasks[source],
                   np.asarray(raters) if model == "mixed" else None)


# --------------------------------------------------------------------------- the card


def _summary_stats(values: list[float]) -> dict[str, Any]:
    array = np.asarray(values, dtype=float)
    defined = array[~np.isnan(array)]
    return {
        "mean": float(defined.mean()) if len(defined) else None,
        "sd": float(defined.std(ddof=1)) if len(defined) > 1 else None,
        "values": [None if math.isnan(v) else float(v) for v in array],
        "undefined": int(np.isnan(array).sum()),
    }


def _calibration_table(predicted: np.ndarray, observed: np.ndarray) -> list[dict[str, float]]:
    """Up to :data:`CALIBRATION_BINS` bins of about equal count over the sorted predictions; a
    cut that would split equal predictions moves to the nearer end of their run, so that equal
    predictions share a bin, and the table does not depend on the rows' order."""
    order = np.lexsort((observed, predicted))  # (ties by observed: sums in the same order)
    p = predicted[order]
    sizes = [len(c) for c in np.array_split(p, min(CALIBRATION_BINS, len(p)))]
    cuts = set()
    for cut in np.cumsum(sizes[:-1]):
        start, end = (int(np.searchsorted(p, p[cut], side)) for side in ("left", "right"))
        moved = start if cut - start <= end - cut else end
        if 0 < moved < len(p):
            cuts.add(moved)
    table = []
    for chunk in np.split(order, sorted(cuts)):
        p, o = predicted[chunk], observed[chunk]
        table.append({"lo": float(p.min()), "hi": float(p.max()), "n": int(len(chunk)),
                      "predicted": float(p.mean()), "observed": float(o.mean())})
    return table


def _percentile_ci(samples: np.ndarray) -> list[list[float]]:
    tail = 100 * (1 - CI_LEVEL) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
    return [[float(a), float(b)] for a, b in zip(low, high, strict=True)]


def fit_gaps(frame: pd.DataFrame, target: str, columns: Sequence[str],
             model: str) -> dict[str, np.ndarray]:
    """The rows a fit leaves out or refuses (:func:`~hybridmetric.schema.missing_rows`): those
    without the target, a feature or, for the models trained on each rater's grade, grades."""
    return missing_rows(frame, [target, *columns] + (["ratings"] if model in RATER_MODELS
                                                     else []))


def _training_rows(
    frame: pd.DataFrame, target: str, features: Sequence[str] | None, model: str,
    scorer_signatures: Mapping[str, str] | None, missing: str,
) -> tuple[pd.DataFrame, list[str], np.ndarray]:
    """The rows to fit on, the feature columns, and the input positions of those rows."""
    if target not in frame.columns:
        raise ValueError(f"target column '{target}' is not in the table "
                         f"(columns: {list(frame.columns)})")
    if model in RATER_MODELS and "ratings" not in frame.columns:
        raise ValueError(f"model='{model}' trains on each rater's grade, from the 'ratings' "
                         "column, which this table lacks; use --model nonneg or ridge")
    if model in RATER_MODELS and target != "rating":
        raise ValueError(f"model='{model}' trains on each rater's grade of 'rating' (the "
                         f"'ratings' column), not of the target '{target}'; use --model nonneg "
                         "or ridge")
    columns = feature_columns(frame, features, target)
    _check_signatures(columns, scorer_signatures)
    if model in RATER_MODELS:  # (a table made in Python: no reader checked its grades)
        frame = checked_ratings(frame)
    frame = renumbered(frame)
    gaps = fit_gaps(frame, target, columns, model)
    if gaps and missing == "refuse":
        complete = [c for c in columns if c not in gaps]
        features_hint = (f"fit on features every row has (--features "
                         f"{','.join(complete) or '...'}), or " if set(gaps) & set(columns)
                         else "")
        raise ValueError(missing_message(
            frame, gaps,
            f"{features_hint}pass missing='drop-rows' (--missing drop-rows) to fit on complete "
            "rows only"))
    keep = np.ones(len(frame), dtype=bool)
    for rows in gaps.values():
        keep[rows] = False
    frame = renumbered(frame[keep])
    if frame.empty:
        raise ValueError("no row has every chosen feature and the target; choose other features")
    values = numbers(frame, target)
    if np.unique(values).size < 2:  # (as the audit: no agreement with it to measure)
        raise ValueError(f"'{target}' takes one value on every training row ({values[0]:g}): "
                         "there is nothing for a hybrid to fit")
    constant = [c for c in columns if frame[c].nunique() < 2]
    if constant:
        raise ValueError(f"feature(s) {constant} are constant on the training rows; leave them "
                         "out (--features, naming the others)")
    return frame, columns, np.flatnonzero(keep)


def _cross_validate(
    design: _Design, estimator: Callable[[], HybridMetric], baselines: dict[str, np.ndarray],
    folds: int, repeats: int, seed: int, tick: Callable[[], object],
) -> tuple[dict[str, dict[str, list[float]]], np.ndarray]:
    """Per-fold correlations of the hybrid and each baseline with the target, on held-out tasks,
    and the out-of-fold predictions of the first repeat; ``tick`` after each fold's fit."""
    names = ["hybrid", *baselines]
    per_fold: dict[str, dict[str, list[float]]] = {n: {m: [] for m in CORRELATIONS} for n in names}
    out_of_fold = np.full(len(design.y), np.nan)
    for repeat, _, test in grouped_folds(design.tasks, folds, repeats, seed):
        train = ~np.isin(design.tasks_train, design.tasks[test])
        kw = {"raters": design.raters[train]} if design.raters is not None else {}
        try:
            fitted = estimator().fit(design.X_train[train], design.y_train[train], **kw)
        except DegenerateFitError as error:
            features = list(baselines)[:design.X_train.shape[1]]  # (the features come first)
            constant = [name for j, name in enumerate(features)
                        if design.X_train[train, j].max() == design.X_train[train, j].min()]
            why = (f"{', '.join(constant)} constant on its training rows" if constant else
                   "no feature constant on its training rows, but some collinear")
            raise DegenerateFitError(
                f"{error} (in a cross-validation fold holding out tasks "
                f"{sorted(map(str, np.unique(design.tasks[test])))[:5]}: {why}; fewer "
                "--folds keeps more tasks in each fold's training rows)") from None
        except RuntimeError as error:  # (a model that did not converge on this fold's rows)
            raise RuntimeError(
                f"{error} (in a cross-validation fold holding out tasks "
                f"{sorted(map(str, np.unique(design.tasks[test])))[:5]}, fitted on the other "
                f"{np.unique(design.tasks_train[train]).size} tasks' rows; fewer --folds keeps "
                "more tasks in each fold's training rows)") from None
        tick()
        predicted = fitted.predict(design.X[test])
        if repeat == 0:
            out_of_fold[test] = predicted
        candidates = {"hybrid": predicted, **{n: v[test] for n, v in baselines.items()}}
        for name, values in candidates.items():
            for metric, value in correlations(values, design.y[test]).items():
                per_fold[name][metric].append(value)
    return per_fold, out_of_fold


def fit_card(
    frame: pd.DataFrame,
    target: str = "rating",
    features: Sequence[str] | None = None,
    model: str = "nonneg",
    seed: int = 0,
    scorer_signatures: Mapping[str, str] | None = None,
    *,
    alpha: float = 1.0,
    calibration: str = "none",
    scale: tuple[float, float] | None = None,
    folds: int = 5,
    repeats: int = 10,
    n_boot: int = 200,
    missing: str = "refuse",
    progress: bool | None = None,
    where: str | Sequence[str] = (),
) -> MetricCard:
    """Fit a hybrid on ``frame``, validate it on held-out tasks, and return its metric card.

    ``scale`` is the study's rating scale (None: the observed range of the target);
    ``missing`` is ``refuse`` or ``drop-rows`` (see the module docstring). ``seed`` fixes the fold
    shuffles (``default_rng(seed)``) and the bootstrap resamples (``default_rng([seed, 1])``).
    ``progress``: a bar over the fits (``folds * repeats``, the full one, ``n_boot``) on
    stderr; None shows it on a terminal, and a line a minute elsewhere (a log: the ordinal model
    on a scale of many levels takes seconds a fit; :mod:`hybridmetric.progress`). ``where``:
    fit on the rows that meet these ``FIELD=VALUE`` conditions alone
    (:func:`~hybridmetric.schema.rows_meeting`), which the card's training data records (the
    out-of-fold predictions of the others are NaN).
    """
    HybridMetric(model=model, alpha=alpha, calibration=calibration, bounds=scale)._check_params()
    if missing not in ("refuse", "drop-rows"):
        raise ValueError(f"missing must be 'refuse' or 'drop-rows', got {missing!r}")
    if n_boot < 0:
        raise ValueError(f"the bootstrap resamples (--bootstrap) must be >= 0, got {n_boot}")
    n_table_rows = len(frame)
    where = where_conditions(where)
    chosen = rows_meeting(frame, where) if where else np.ones(n_table_rows, dtype=bool)
    if where:  # (_training_rows renumbers the table either way)
        frame = renumbered(frame[chosen])
    n_input = len(frame)
    frame, columns, kept = _training_rows(frame, target, features, model, scorer_signatures,
                                          missing)
    n_dropped = n_input - len(kept)
    design = _design(frame, target, columns, model)
    if np.unique(design.y_train).size < 2:  # (the raters' grades: see _training_rows)
        raise ValueError(f"the raters' grades ('ratings') take one value on every training "
                         f"row ({design.y_train[0]:g}): there is nothing for a hybrid to fit")
    if scale is None:
        scale_source = "observed"
        scale = (float(design.y_train.min()), float(design.y_train.max()))
    else:
        scale_source, scale = "given", (float(scale[0]), float(scale[1]))
        check_grades_on_scale(frame, scale, target)  # (first: it names the row and the rater)
        check_on_scale(frame, target, scale)

    repeats_asked = repeats
    if folds == np.unique(design.tasks).size:  # (a fold for each task: every repeat splits alike)
        repeats = 1

    def estimator() -> HybridMetric:
        return HybridMetric(model=model, alpha=alpha, calibration=calibration, bounds=scale)

    dibia = dibia_columns(list(frame.columns))
    dibia_values, dibia_skipped = None, None
    if dibia is None:
        dibia_skipped = f"needs {' or '.join(DIBIA_PASS_COLUMNS)} and {DIBIA_EDIT_COLUMN}"
    else:
        dibia_values = dibia_combined(frame[dibia[0]].to_numpy(float),
                                      frame[dibia[1]].to_numpy(float))
        if np.isnan(dibia_values).any():
            dibia_skipped = f"{dibia[0]} or {dibia[1]} is missing on some training rows"
            dibia_values = None
    baselines = {c: design.X[:, j] for j, c in enumerate(columns)}
    if dibia_values is not None:
        baselines["dibia_combined"] = dibia_values
    with progress_bar(folds * repeats + 1 + n_boot, "fitting", "fit", progress) as bar:
        per_fold, out_of_fold = _cross_validate(design, estimator, baselines, folds, repeats,
                                                seed, bar.update)
        raters_kw = {"raters": design.raters} if design.raters is not None else {}
        full = estimator().fit(design.X_train, design.y_train, **raters_kw)
        if model == "nonneg" and not np.any(full.coef_ > 0):
            raise DegenerateFitError(
                f"every weight of the nonneg model is 0: none of {', '.join(columns)} rises "
                f"with '{target}' once the others are in, so the hybrid would be one constant "
                f"value; check that a higher '{target}' means more valuable code (the features "
                "score better code higher), or fit --model ridge, whose weights may be negative")
        bar.update()
        boot, boot_skipped = _bootstrap_weights(design, estimator, n_boot, seed, bar.update)

    cv = {"folds": folds, "repeats": repeats, "grouped_by": "task_id",
          "n_folds_run": folds * repeats,
          **({"note": f"a fold for each of the {folds} tasks: every repeat would split them "
                      f"alike, so 1 repeat was run, not {repeats_asked}"}
             if repeats != repeats_asked else {}),
          "hybrid": {m: _summary_stats(v) for m, v in per_fold["hybrid"].items()},
          "features": {c: {m: _summary_stats(v) for m, v in per_fold[c].items()} for c in columns},
          "dibia_combined": (
              {"skipped": dibia_skipped} if dibia_values is None else
              {"pass": dibia[0], "edit_sim": dibia[1],
               **{m: _summary_stats(v) for m, v in per_fold["dibia_combined"].items()}})}
    cv["comparisons"] = {m: _comparison(per_fold, columns, m, folds) for m in CORRELATIONS}

    per_unit = full.coef_ / full.scale_
    weights = {}
    for j, column in enumerate(columns):
        weights[column] = {
            "value": float(full.coef_[j]),
            "ci": [v * float(full.scale_[j]) for v in boot[j]] if boot else None,
            "per_unit": float(per_unit[j]),
            "per_unit_ci": boot[j] if boot else None,
        }
    used = frame[["task_id", target, *columns] + (["ratings"] if model in RATER_MODELS else [])]
    training = {"sha256": frame_hash(used), "n_rows": int(len(frame)),
                "n_tasks": int(len(np.unique(design.tasks))), "n_dropped_rows": n_dropped,
                "n_rater_rows": int(len(design.y_train)) if model in RATER_MODELS else None,
                "where": where, "n_table_rows": n_table_rows,
                "collinear": _collinear(design.X, columns)}
    versions = environment(VERSIONED_PACKAGES)
    scorers = {c: scorer_of(c, list(scorer_signatures)) for c in columns}
    calibration_block: dict[str, Any] = {"method": "isotonic" if calibration == "isotonic"
                                         else "clip"}
    if calibration == "isotonic":
        calibration_block["points"] = {"x": full.iso_x_.tolist(), "y": full.iso_y_.tolist()}
    calibration_block["table"] = _calibration_table(out_of_fold, design.y)
    card: dict[str, Any] = {
        "format": CARD_FORMAT, "model": model,
        "alpha": float(alpha) if model == "ridge" else None, "target": target,
        "scale": list(scale), "scale_source": scale_source,
        "features": [{"name": c, "scorer": scorers[c], "signature": scorer_signatures[scorers[c]],
                      "mean": float(full.mean_[j]), "std": float(full.scale_[j]),
                      "distinct": int(frame[c].nunique())}
                     for j, c in enumerate(columns)],
        "weights": weights,
        "weights_units": (
            ("log-odds" if model == "ordinal" else "rating points")
            + " per training SD of the feature (value, ci); per 1.0 of the raw score "
            f"(per_unit, per_unit_ci); {int(CI_LEVEL * 100)}% percentile bootstrap over tasks"),
        "intercept": None if model == "ordinal" else float(full.intercept_),
        "intercept_per_unit": (None if model == "ordinal" else
                               float(full.intercept_ - np.dot(per_unit, full.mean_))),
        "calibration": calibration_block, "cv": cv, "training": training,
        "bootstrap": {"n": n_boot, "level": CI_LEVEL, "skipped": boot_skipped}, "seed": seed,
        "versions": versions,
    }
    if model == "ordinal":
        card["ordinal"] = {"levels": full.levels_.tolist(), "cutpoints": full.cutpoints_.tolist()}
    if model == "mixed":
        card["rater_sd"] = full.rater_sd_
    card["signature"] = signature({
        "content": card_content_hash(card),
        "card": CARD_FORMAT, "model": model,
        **({"alpha": float(alpha)} if model == "ridge" else {}),  # (the others have no penalty)
        "calibration": calibration,
        "target": target, "features": ",".join(columns), "scale": f"{scale[0]!r},{scale[1]!r}",
        "folds": folds, "repeats": repeats, "boot": n_boot, "seed": seed,
        "data": training["sha256"][:16], "missing": missing,
        **({"where": where_signature(where)} if where else {}), **versions})
    held_out = np.full(n_table_rows, np.nan)
    held_out[np.flatnonzero(chosen)[kept]] = out_of_fold
    return MetricCard(card, out_of_fold=held_out)


def _bootstrap_weights(design: _Design, estimator: Callable[[], HybridMetric], n_boot: int,
                       seed: int, tick: Callable[[], object]
                       ) -> tuple[list[list[float]] | None, int]:
    """Percentile CIs of the per-unit weights over task resamples (None when n_boot is 0), and
    how many resamples were left out because the model cannot be fitted on them (a feature
    constant in the resample: the mixed model's design is then singular); ``tick`` after
    each."""
    if n_boot == 0:
        return None, 0
    tasks = np.unique(design.tasks_train)
    rows_of = {t: np.flatnonzero(design.tasks_train == t) for t in tasks}
    rng = np.random.default_rng([seed, 1])
    samples, skipped = [], 0
    for _ in range(n_boot):
        rows = np.concatenate([rows_of[t] for t in rng.choice(tasks, size=len(tasks))])
        kw = {"raters": design.raters[rows]} if design.raters is not None else {}
        try:
            fitted = estimator().fit(design.X_train[rows], design.y_train[rows], **kw)
        except DegenerateFitError:
            skipped += 1
            continue
        finally:
            tick()
        samples.append(fitted.coef_ / fitted.scale_)
    if skipped * 2 > n_boot:
        raise DegenerateFitError(f"the model cannot be fitted on {skipped} of {n_boot} task "
                                 "resamples of the weights' bootstrap (a feature constant in "
                                 "them); leave such features out (--features) or use --model "
                                 "nonneg")
    return _percentile_ci(np.asarray(samples)), skipped


def _comparison(per_fold: dict[str, dict[str, list[float]]], columns: list[str], metric: str,
                folds: int) -> dict[str, Any]:
    """The hybrid against the single feature with the best mean held-out ``metric`` (among
    those with a value in a fold where the hybrid has one), both over the folds where both are
    defined (a fold whose ratings or predictions are constant has no correlation), with the
    corrected resampled t-test of the gain (the folds' training rows overlap); the statistics
    are None where no such fold exists."""
    values = {c: np.asarray(per_fold[c][metric], dtype=float) for c in ["hybrid", *columns]}
    hybrid_defined = ~np.isnan(values["hybrid"])
    defined = [c for c in columns if (hybrid_defined & ~np.isnan(values[c])).any()]
    best = max(defined, key=lambda c: (np.nanmean(values[c]), c)) if defined else None
    both = (hybrid_defined & ~np.isnan(values[best]) if best is not None
            else np.zeros(len(values["hybrid"]), dtype=bool))
    hybrid = values["hybrid"][both]
    feature = values[best][both] if best is not None else hybrid
    # (to 9 decimals: the hybrid, rounded to OUTPUT_DIGITS, moves r in the 12th; a one-feature
    # hybrid would "win" folds by that)
    gain = np.round(hybrid - feature, 9)
    t, p = corrected_resampled_t(gain, 1 / (folds - 1))  # (NaN with fewer than 2 folds)

    def mean(values: np.ndarray) -> float | None:
        return float(values.mean()) if len(values) else None

    def number(value: float) -> float | None:
        return None if math.isnan(value) else value

    return {"metric": metric, "best_feature": best,
            "best_feature_value": mean(feature), "hybrid_value": mean(hybrid),
            "gain": mean(gain),
            "gain_sd": float(gain.std(ddof=1)) if len(gain) > 1 else None,
            "wins": int(np.sum(gain > 0)), "n_folds": int(len(gain)),
            "hybrid_folds": int(hybrid_defined.sum()),
            "best_feature_folds": int((~np.isnan(values[best])).sum()) if best is not None else 0,
            "beats_best_feature": bool(len(gain) and gain.mean() > 0),
            "t": number(t), "p": number(p)}


def cv_comparisons(cv: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A card's ``cv.comparisons``; a card of before's ``cv.comparison`` (Kendall's alone, with
    no test, and before that without the folds where each alone is defined) in those terms."""
    if "comparisons" in cv or "comparison" not in cv:
        return dict(cv.get("comparisons") or {})
    old = cv["comparison"]
    renamed = {"best_feature_kendall": "best_feature_value", "hybrid_kendall": "hybrid_value"}
    return {"kendall": {"t": None, "p": None, "hybrid_folds": old.get("n_folds"),
                        "best_feature_folds": old.get("n_folds"),
                        **{renamed.get(k, k): v for k, v in old.items()}}}


def _comparison_lines(comparisons: Mapping[str, Mapping[str, Any]],
                      distinct: Mapping[str, int | None]) -> list[str]:
    """The summary's lines on the hybrid against the best single feature, by each statistic
    (``distinct``: each feature's number of distinct values on the training rows)."""
    if not comparisons:
        return []
    if all(c["gain"] is None for c in comparisons.values()):
        return ["the hybrid cannot be compared with any single feature: no held-out fold gives "
                "both a correlation (constant ratings or predictions in every fold; more tasks, "
                "or fewer folds, give some)"]
    lines = ["hybrid against the best single feature, held out (means over the folds where "
             "both are defined; p: one-sided, corrected resampled t):"]
    width = max(map(len, comparisons))
    for name, c in comparisons.items():
        if c["gain"] is None:
            lines.append(f"  {name:{width}}  no fold where both are defined")
            continue
        p = "n/a" if c["p"] is None else format(c["p"], ".3g")
        sd = "n/a" if c["gain_sd"] is None else format(c["gain_sd"], ".3f")
        lines.append(
            f"  {name:{width}}  hybrid {c['hybrid_value']:.3f}, best feature "
            f"{c['best_feature']} {c['best_feature_value']:.3f}: difference {c['gain']:+.3f} "
            f"(sd {sd}; hybrid higher in {c['wins']} of {c['n_folds']} folds), p {p}")
        if (c["hybrid_folds"], c["best_feature_folds"]) != (c["n_folds"], c["n_folds"]):
            lines.append(
                f"  {'':{width}}  (the table averages each over the folds where it alone is "
                f"defined: the hybrid's {c['hybrid_folds']}, {c['best_feature']}'s "
                f"{c['best_feature_folds']}; a fold's correlation is undefined where its "
                "ratings or that metric's values are all equal)")
    kendall, pearson = comparisons.get("kendall"), comparisons.get("pearson")
    if (kendall and pearson and kendall["gain"] is not None and pearson["gain"] is not None
            and kendall["beats_best_feature"] != pearson["beats_best_feature"]
            and (distinct.get(kendall["best_feature"]) or math.inf) <= FEW_VALUES):
        lines.append(
            f"  (Kendall's best feature, {kendall['best_feature']}, takes "
            f"{distinct[kendall['best_feature']]} values: tau b leaves the pairs a metric ties "
            "out of its denominator, so it is judged on the few pairs it sets apart, where "
            "Pearson's r weighs every row; Deutsch, Foster & Freitag 2023 on ties)")
    return lines


def card_content_hash(data: Mapping[str, Any]) -> str:
    """A hash of everything a card holds but its signature (its JSON, keys sorted), which the
    signature's ``content`` field records: weights, intercept, calibration and scale edited by
    hand no longer match it."""
    text = json.dumps({k: v for k, v in data.items() if k != "signature"}, sort_keys=True,
                      allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class MetricCard:
    """A fitted hybrid with its validation: the ``CARD.json`` document (see module docstring)."""

    def __init__(self, data: dict[str, Any], out_of_fold: np.ndarray | None = None):
        if data.get("format") != CARD_FORMAT:
            raise ValueError(f"not a metric card: format is {data.get('format')!r}, "
                             f"expected {CARD_FORMAT!r}")
        absent = [k for k in CARD_KEYS if k not in data]
        if absent:
            raise ValueError(f"metric card lacks {absent}; fit it again with hybridmetric fit")
        self.data = data
        #: From :func:`fit_card` only: each input row's prediction by the model of the first CV
        #: repeat that did not see its task (NaN for rows left out of the fit); not saved.
        self.out_of_fold = out_of_fold

    @property
    def features(self) -> list[str]:
        return [f["name"] for f in self.data["features"]]

    def save(self, path: str | os.PathLike) -> Path:
        """Write the card as JSON, atomically."""
        with atomic_path(path) as temporary:
            temporary.write_text(json.dumps(self.data, indent=2, allow_nan=False) + "\n",
                                 encoding="utf-8")
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> MetricCard:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{path}: not valid JSON ({error})") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read the metric card {path}: "
                             f"{getattr(error, 'strerror', None) or error}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a metric card is a JSON object")
        card = cls(data)
        signed = (parse_signature(data["signature"]).get("content")
                  if isinstance(data["signature"], str) else None)
        if signed is None:
            raise ValueError(f"{path}: its signature records no hash of its content, so nothing "
                             "shows that its numbers are those fitted: fit it again "
                             "(hybridmetric fit)")
        try:
            content = card_content_hash(data)
        except ValueError:  # (NaN or infinity written in by hand: no card holds them)
            content = None
        if content != signed:
            raise ValueError(f"{path}: its content is not what its signature signs (its weights, "
                             "calibration or other numbers were edited after the fit): fit it "
                             "again (hybridmetric fit) rather than edit it")
        return card

    def estimator(self) -> HybridMetric:
        """The fitted :class:`HybridMetric` this card describes."""
        d = self.data
        est = HybridMetric(model=d["model"], alpha=1.0 if d["alpha"] is None else d["alpha"],
                           calibration="isotonic" if d["calibration"]["method"] == "isotonic"
                           else "none", bounds=tuple(d["scale"]))
        est.n_features_in_ = len(d["features"])
        est.feature_names_in_ = np.array(self.features, dtype=object)
        est.mean_ = np.array([f["mean"] for f in d["features"]], dtype=float)
        est.scale_ = np.array([f["std"] for f in d["features"]], dtype=float)
        est.coef_ = np.array([d["weights"][f]["value"] for f in self.features], dtype=float)
        est.intercept_ = 0.0 if d["intercept"] is None else float(d["intercept"])
        est.bounds_ = (float(d["scale"][0]), float(d["scale"][1]))
        if d["model"] == "ordinal":
            est.levels_ = np.array(d["ordinal"]["levels"], dtype=float)
            est.cutpoints_ = np.array(d["ordinal"]["cutpoints"], dtype=float)
        if est.calibration == "isotonic":
            est.iso_x_ = np.array(d["calibration"]["points"]["x"], dtype=float)
            est.iso_y_ = np.array(d["calibration"]["points"]["y"], dtype=float)
        return est

    def check(self, columns: Sequence[str], scorer_signatures: Mapping[str, str]) -> None:
        """Raise :class:`CardMismatchError` unless the scores have every feature, scored by the
        scorers (same signatures) the card was fitted on."""
        problems = [f"  {f}: column missing from the scores" for f in self.features
                    if f not in columns]
        for feature in self.data["features"]:
            ours, theirs = feature["signature"], scorer_signatures.get(feature["scorer"])
            if theirs is None:
                problems.append(f"  {feature['name']}: the scores carry no signature for "
                                f"scorer '{feature['scorer']}'")
            elif theirs != ours:
                problems.append(
                    f"  {feature['name']}: differs in {', '.join(changed(ours, theirs))}"
                    f"\n    card:   {ours}\n    scores: {theirs}")
        if problems:
            raise CardMismatchError(
                "the card does not match these scores; refusing to apply it:\n"
                + "\n".join(problems)
                + "\nre-score with the scorer settings and versions in the card, or fit a new "
                "card on these scores")

    def apply(self, frame: pd.DataFrame, scorer_signatures: Mapping[str, str],
              missing: str = "refuse") -> np.ndarray:
        """The hybrid's value for each row of ``frame`` (the ``score.hybrid`` column).

        ``missing="refuse"`` stops at a row without some feature; ``"nan"`` gives it NaN.
        """
        if missing not in ("refuse", "nan"):
            raise ValueError(f"missing must be 'refuse' or 'nan', got {missing!r}")
        self.check(list(frame.columns), scorer_signatures)
        frame = renumbered(frame)
        gaps = missing_rows(frame, self.features)
        if gaps and missing == "refuse":
            raise ValueError(missing_message(
                frame, gaps, "score those rows, or pass missing='nan' to give them NaN"))
        X = frame[self.features].astype(float)
        ok = np.isfinite(X.to_numpy()).all(axis=1)
        result = np.full(len(frame), np.nan)
        if ok.any():
            result[ok] = self.estimator().predict(X[ok])
        return result

    def summary(self) -> str:
        """What ``hybridmetric fit`` prints: held-out agreement of the hybrid and each feature."""
        d, cv = self.data, self.data["cv"]
        t = d["training"]
        lines = [
            f"hybrid metric: model {d['model']}, target {d['target']}, scale "
            f"{d['scale'][0]:g} to {d['scale'][1]:g}, {t['n_rows']} rows, {t['n_tasks']} tasks"
            + (f" ({t['n_dropped_rows']} rows with missing values dropped)"
               if t["n_dropped_rows"] else "")
            + (f"; the rows where {where_text(t['where'])}, of the table's {t['n_table_rows']}"
               if t.get("where") else ""),
            f"held-out agreement with {d['target']}: {cv['folds']}-fold CV grouped by "
            f"task, {cv['repeats']} repeats (mean ± sd over {cv['n_folds_run']} folds)"
            + (f"; {cv['note']}" if cv.get("note") else ""),
        ]
        width = max(len(visible(n)) for n in [*cv["features"], "dibia_combined"]) + 2
        places = shown_decimals(largest_abs(np.asarray(d["scale"], float)))  # (the weights')
        lines.append(f"{'':{width}}{'kendall':>16}{'spearman':>16}{'pearson':>16}"
                     "   weight [95% CI] per SD")

        def row(name: str, block: dict[str, Any], weight: dict[str, Any] | None) -> str:
            cells = []
            for metric in CORRELATIONS:
                m, s = block[metric]["mean"], block[metric]["sd"]
                cells.append("n/a" if m is None else f"{m:.3f} ± {s if s is not None else 0:.3f}")
            text = f"{visible(name):{width}}" + "".join(f"{c:>16}" for c in cells)
            if weight is not None:
                ci = weight["ci"]
                text += f"   {weight['value']:+.{places}f}" + (
                    f" [{ci[0]:+.{places}f}, {ci[1]:+.{places}f}]" if ci else "")
            return text

        lines.append(row("hybrid", cv["hybrid"], None))
        for name, block in cv["features"].items():
            lines.append(row(name, block, d["weights"][name]))
        if "skipped" in cv["dibia_combined"]:
            lines.append(f"{'dibia_combined':{width}}skipped: {cv['dibia_combined']['skipped']}")
        else:
            lines.append(row("dibia_combined", cv["dibia_combined"], None))
        lines += _comparison_lines(cv_comparisons(cv), {f["name"]: f.get("distinct")
                                                        for f in d["features"]})
        for a, b, r in t.get("collinear") or []:
            lines.append(f"note: {a} and {b} correlate at {r:.3f} on the training rows: the "
                         "hybrid cannot tell their weights apart (wide CIs, either may take the "
                         "other's share); fit one of them (--features) to read its weight")
        lines.append(f"signature: {d['signature']}")
        # (what no name or loaded signature may reorder or hide: see signature.visible)
        return visible("\n".join(lines), keep="\n")

    def __str__(self) -> str:
        return self.summary()


__all__ = [
    "CARD_FORMAT",
    "COLUMN_OWNERS",
    "CardMismatchError",
    "DegenerateFitError",
    "HYBRID_COLUMN",
    "HybridMetric",
    "MetricCard",
    "cv_comparisons",
    "dibia_combined",
    "dibia_columns",
    "feature_columns",
    "fit_card",
    "grouped_folds",
    "kendall_scorer",
    "scorer_of",
]
