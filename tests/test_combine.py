"""The fitted hybrid: weight recovery, constraints, grouped validation, the card, and sklearn."""

from __future__ import annotations

import json
import math
import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.optimize import lsq_linear
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from hybridmetric.combine import (
    CARD_FORMAT,
    CardMismatchError,
    DegenerateFitError,
    HybridMetric,
    MetricCard,
    card_content_hash,
    cv_comparisons,
    dibia_columns,
    dibia_combined,
    feature_columns,
    fit_card,
    grouped_folds,
    kendall_scorer,
    scorer_of,
)
from hybridmetric.combine import _comparison as comparison
from hybridmetric.io import read_generations, write_generations
from hybridmetric.scoring import read_scores, scores_hash

SIGNATURES = {"chrf": "scorer:chrf|v:1|nrefs:best", "edit_sim": "scorer:edit_sim|v:1|level:char",
              "noise": "scorer:noise|v:1", "pass_rate": "scorer:pass_rate|v:1|timeout_s:10.0"}


def study_frame(n_tasks: int = 60, per_task: int = 4, seed: int = 0) -> pd.DataFrame:
    """Generations whose rating is 0.5 + 2*chrf + 1*edit_sim + noise, clipped to 0-4.

    Each row also has integer per-rater grades around the rating (three raters of six).
    """
    rng = np.random.default_rng(seed)
    n = n_tasks * per_task
    chrf, edit = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    rating = np.clip(0.5 + 2 * chrf + 1 * edit + rng.normal(0, 0.15, n), 0, 4)
    ratings = []
    for value in rating:
        raters = rng.choice(6, size=3, replace=False)
        ratings.append({f"r{r}": int(np.clip(round(value + rng.normal(0, 0.3)), 0, 4))
                        for r in raters})
    return pd.DataFrame({
        "task_id": [f"t{i // per_task}" for i in range(n)],
        "candidate": [f"x = {i}" for i in range(n)],
        "rating": rating, "ratings": ratings,
        "score.chrf": chrf, "score.edit_sim": edit, "score.noise": rng.uniform(0, 1, n),
        "score.pass": (rng.uniform(0, 1, n) < chrf).astype(float),
    })


def quick_card(frame: pd.DataFrame, **kwargs) -> MetricCard:
    options = {"features": ["chrf", "edit_sim", "noise"], "scorer_signatures": SIGNATURES,
               "folds": 4, "repeats": 2, "n_boot": 40, "scale": (0, 4)}
    options.update(kwargs)
    return fit_card(frame, **options)


# ------------------------------------------------------------------------- the estimator


def test_nonneg_recovers_known_weights_and_sets_negative_effect_to_zero():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (3000, 3))
    y = 1.0 + 2.0 * X[:, 0] + 0.5 * X[:, 1] - 0.7 * X[:, 2] + rng.normal(0, 0.1, 3000)
    nonneg = HybridMetric(bounds=(-10, 10)).fit(X, y)
    per_unit = nonneg.coef_ / nonneg.scale_
    assert per_unit[0] == pytest.approx(2.0, abs=0.05)
    assert per_unit[1] == pytest.approx(0.5, abs=0.05)
    assert per_unit[2] == 0.0  # the harmful signal is dropped, never counted against value
    assert (nonneg.coef_ >= 0).all()
    ridge = HybridMetric(model="ridge", alpha=0.0, bounds=(-10, 10)).fit(X, y)
    assert (ridge.coef_ / ridge.scale_)[2] == pytest.approx(-0.7, abs=0.05)


def test_nonneg_equals_an_independent_bounded_least_squares():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 4))
    y = X @ np.array([1.0, -1.0, 0.3, 0.0]) + rng.normal(0, 0.5, 200)
    model = HybridMetric(bounds=(-100, 100)).fit(X, y)
    Z = (X - X.mean(0)) / X.std(0)
    design = np.hstack([np.ones((200, 1)), Z])
    low = np.r_[-np.inf, np.zeros(4)]
    reference = lsq_linear(design, y, bounds=(low, np.full(5, np.inf)), tol=1e-12).x
    assert model.intercept_ == pytest.approx(reference[0], abs=1e-8)
    np.testing.assert_allclose(model.coef_, reference[1:], atol=1e-7)
    np.testing.assert_allclose(model.predict(X), design @ reference, atol=1e-7)


def test_ridge_equals_standard_scaler_plus_ridge_and_output_is_clipped():
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 3))
    y = X @ np.array([0.5, 1.0, -0.2]) + 2
    ours = HybridMetric(model="ridge", alpha=3.0, bounds=(-50, 50)).fit(X, y)
    theirs = make_pipeline(StandardScaler(), Ridge(alpha=3.0)).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), atol=1e-10)
    clipped = HybridMetric(model="ridge", alpha=3.0).fit(X, y)  # bounds: the observed range of y
    outside = clipped.predict(np.array([[100.0, 100.0, 0.0], [-100.0, -100.0, 0.0]]))
    assert outside.tolist() == [y.max(), y.min()]


def test_values_apart_by_float_noise_are_one_output_so_ties_stay_ties():
    """A row and the same row with a feature a few units in the last place away: their
    unrounded outputs differ in the last bits (as one value reached by two folds' arithmetic
    does), the hybrid's are equal, and within 12 significant digits of the unrounded."""
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (200, 3))
    y = 1 + X @ np.array([0.7, 1.3, 0.4]) + rng.normal(0, 0.1, 200)
    model = HybridMetric(model="ridge", bounds=(0, 4)).fit(X, y)
    row = np.array([0.3, 0.1, 0.7])
    rows = np.vstack([row, row, row])
    rows[1, 0], rows[2, 1] = row[0] + 2e-16, row[1] - 1e-16
    unrounded = model.intercept_ + ((rows - model.mean_) / model.scale_) @ model.coef_
    assert np.unique(unrounded).size > 1
    predicted = model.predict(rows)
    assert np.unique(predicted).size == 1
    np.testing.assert_allclose(predicted, unrounded, rtol=0, atol=1e-11)
    wide = HybridMetric(model="ridge", bounds=(0, 400)).fit(X, 100 * y)  # 12 digits, 9 decimals
    assert wide.predict(rows[:1])[0] == round(wide.predict(rows[:1])[0], 9)


@pytest.mark.parametrize("model", ["nonneg", "ridge"])
def test_a_tiny_scale_keeps_the_hybrid_s_digits(model):
    """Ratings on 0 to 4e-7 are ratings on 0 to 4 times 1e-7, and so is the hybrid, to 12
    significant digits: rounded to 11 decimals, as on 0-4, it kept ~4 of them."""
    rng = np.random.default_rng(6)
    X = rng.uniform(0, 1, (120, 3))
    y = np.clip(1 + X @ np.array([0.7, 1.3, 0.4]) + rng.normal(0, 0.3, 120), 0, 4)
    plain = HybridMetric(model=model, bounds=(0, 4)).fit(X, y).predict(X)
    tiny = HybridMetric(model=model, bounds=(0, 4e-7)).fit(X, y * 1e-7).predict(X)
    np.testing.assert_allclose(tiny, plain * 1e-7, rtol=1e-10, atol=0)
    assert stats.kendalltau(tiny, y).statistic == stats.kendalltau(plain, y).statistic


def test_isotonic_calibration_is_monotone_and_on_the_scale():
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (400, 2))
    y = np.clip(np.round(4 * X[:, 0] ** 2 + X[:, 1]), 0, 4)
    model = HybridMetric(calibration="isotonic", bounds=(0, 4)).fit(X, y)
    grid = np.column_stack([np.linspace(-1, 2, 200), np.full(200, 0.5)])
    predicted = model.predict(grid)
    assert (np.diff(predicted) >= 0).all()
    assert predicted.min() >= 0 and predicted.max() <= 4
    assert predicted[0] < predicted[-1]


def test_ordinal_orders_classes_and_matches_statsmodels():
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, 1500)
    latent = 1.5 * x + rng.logistic(size=1500)
    grades = np.digitize(latent, [-3.0, -1.0, 1.0, 3.0])  # Likert 0..4, rising with x
    model = HybridMetric(model="ordinal").fit(x[:, None], grades)
    assert model.levels_.tolist() == [0, 1, 2, 3, 4]
    assert (np.diff(model.cutpoints_) > 0).all()
    probe = np.array([[-3.0], [-1.5], [0.0], [1.5], [3.0]])
    assert model.class_probabilities(probe).argmax(axis=1).tolist() == [0, 1, 2, 3, 4]
    expected = model.predict(probe)
    assert (np.diff(expected) > 0).all() and expected[0] >= 0 and expected[-1] <= 4
    by_class = [model.predict(x[grades == k][:, None]).mean() for k in range(5)]
    assert (np.diff(by_class) > 0).all()
    # Our cumulative-logit probabilities equal statsmodels' for the same parameters.
    z = (x - x.mean()) / x.std()
    reference = OrderedModel(grades, z[:, None], distr="logit")
    fitted = reference.fit(method="bfgs", disp=False, maxiter=2000)
    np.testing.assert_allclose(model.coef_, fitted.params[:1], atol=1e-3)
    probe_z = (probe - x.mean()) / x.std()
    np.testing.assert_allclose(model.class_probabilities(probe),
                               fitted.model.predict(fitted.params, exog=probe_z), atol=1e-3)


def test_ordinal_refuses_mean_ratings():
    with pytest.raises(ValueError, match="integer grades"):
        HybridMetric(model="ordinal").fit([[0.0], [1.0], [2.0]], [0.5, 1.0, 2.0])


def test_mixed_model_is_not_bent_by_harsh_raters():
    rng = np.random.default_rng(6)
    rows, ys, raters = [], [], []
    for rater in range(12):
        harshness = -0.4 * rater  # the later raters are harsher and see the better code
        x = rng.uniform(rater / 12, rater / 12 + 0.3, 60)
        rows.extend(x)
        ys.extend(2 + 3.0 * x + harshness + rng.normal(0, 0.2, 60))
        raters.extend([f"r{rater}"] * 60)
    X, y = np.array(rows)[:, None], np.array(ys)
    mixed = HybridMetric(model="mixed").fit(X, y, raters=raters)
    pooled = HybridMetric(model="ridge", alpha=0.0).fit(X, y)
    assert (mixed.coef_ / mixed.scale_)[0] == pytest.approx(3.0, abs=0.2)
    assert (pooled.coef_ / pooled.scale_)[0] < 1.0  # pooling confuses rater and code quality
    assert mixed.rater_sd_ > 1.0
    with pytest.raises(ValueError, match="raters"):
        HybridMetric(model="mixed").fit(X, y)
    with pytest.raises(ValueError, match="only by model='mixed'"):
        HybridMetric().fit(X, y, raters=raters)


def test_sklearn_clone_pipeline_and_grouped_cross_val_score():
    frame = study_frame()
    X = frame[["score.chrf", "score.edit_sim"]].to_numpy()
    y, groups = frame["rating"].to_numpy(), frame["task_id"].to_numpy()
    model = HybridMetric(model="ridge", alpha=2.0, calibration="isotonic", bounds=(0, 4))
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert copy.set_params(alpha=5.0).alpha == 5.0
    taus = cross_val_score(model, X, y, groups=groups, cv=GroupKFold(3), scoring=kendall_scorer)
    assert len(taus) == 3 and (taus > 0.6).all()
    r2 = cross_val_score(make_pipeline(StandardScaler(), HybridMetric()), X, y, groups=groups,
                         cv=GroupKFold(3))
    assert (r2 > 0.8).all()


@pytest.mark.parametrize("params", [{}, {"model": "ridge", "calibration": "isotonic"}])
def test_check_estimator(params):
    # Only check_array_api_input may be skipped: sklearn skips it unless SCIPY_ARRAY_API is set,
    # and the estimator does not claim array-API support. The ordinal and mixed models are outside
    # check_estimator: they need integer Likert grades and per-row rater ids, which the generic
    # checks cannot supply; their tests are above.
    results = check_estimator(HybridMetric(**params), on_fail=None, on_skip=None)
    failed = [(r["check_name"], str(r["exception"])) for r in results if r["status"] == "failed"]
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert failed == []
    assert skipped <= {"check_array_api_input"}


def test_hostile_parameters_are_refused():
    with pytest.raises(ValueError, match="model must be one of"):
        HybridMetric(model="lasso").fit([[0.0], [1.0]], [0.0, 1.0])
    with pytest.raises(ValueError, match="calibration"):
        HybridMetric(calibration="platt").fit([[0.0], [1.0]], [0.0, 1.0])
    for bounds in ((4, 0), "04", 4, ("0", "4"), (0, math.nan), (True, 4)):  # ("04": (0, 4))
        with pytest.raises(ValueError, match=re.escape(f"bounds must be (min, max), two "
                                                       f"numbers with min <= max, got {bounds!r}")):
            HybridMetric(bounds=bounds).fit([[0.0], [1.0]], [0.0, 1.0])
    for bounds in ((0, 1), np.array([0.0, 1.0]), (0, math.inf)):
        assert HybridMetric(bounds=bounds).fit([[0.0], [1.0]], [0.0, 1.0]).bounds_ == (0, bounds[1])
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0, got True"):
        HybridMetric(model="ridge", alpha=True).fit([[0.0], [1.0]], [0.0, 1.0])


def test_numpy_parameters_work_in_a_grid_search_and_every_model_keeps_its_bounds():
    """``GridSearchCV`` gives ``alpha`` as numpy integers; ``bounds`` hold for the ordinal
    model too (its expected grade, clipped)."""
    from sklearn.model_selection import GridSearchCV

    frame = study_frame()
    X, y = frame[["score.chrf", "score.edit_sim"]].to_numpy(), np.round(frame["rating"].to_numpy())
    search = GridSearchCV(HybridMetric(model="ridge"), {"alpha": np.array([0, 1, 10])}, cv=3)
    assert search.fit(X, y).best_params_["alpha"] in (0, 1, 10)
    for model in ("nonneg", "ridge", "ordinal"):
        fitted = HybridMetric(model=model, bounds=(1, 2)).fit(X, y)
        predicted = fitted.predict(X)
        assert fitted.bounds_ == (1.0, 2.0) and predicted.min() >= 1.0 and predicted.max() == 2.0
    assert HybridMetric(model="ordinal").fit(X, y).bounds_ == (y.min(), y.max())


# ------------------------------------------------------------------------- folds and baselines


def test_grouped_folds_never_leak_a_task():
    tasks = np.repeat([f"t{i}" for i in range(23)], [1 + i % 4 for i in range(23)])
    splits = grouped_folds(tasks, n_splits=5, n_repeats=3, seed=7)
    assert len(splits) == 15
    for repeat in range(3):
        tested = np.concatenate([test for r, _, test in splits if r == repeat])
        assert sorted(tested.tolist()) == list(range(len(tasks)))  # each row tested once
        for r, train, test in splits:
            if r == repeat:
                assert not set(tasks[train]) & set(tasks[test])
                assert len(train) + len(test) == len(tasks)
                assert len(set(tasks[test])) in (4, 5)
    assert [t.tolist() for _, _, t in splits] == [
        t.tolist() for _, _, t in grouped_folds(tasks, 5, 3, seed=7)]
    first = [set(tasks[t]) for r, _, t in splits if r == 0]
    second = [set(tasks[t]) for r, _, t in splits if r == 1]
    assert first != second
    with pytest.raises(ValueError, match="cannot fill"):
        grouped_folds(["a", "b"], n_splits=3)
    with pytest.raises(ValueError, match=r"at least 2 distinct tasks \(here 1\): fit on more"):
        grouped_folds(["a", "a"], n_splits=2)  # (fewer folds would not do)


def test_dibia_combined_formula():
    assert dibia_combined([1, 0, 0, 1], [0.4, 0.4, 0.0, 1.0]).tolist() == [1.0, 0.4, 0.0, 1.0]
    assert dibia_columns(["score.pass_rate", "score.edit_sim"]) == ("score.pass_rate",
                                                                   "score.edit_sim")
    assert dibia_columns(["score.pass", "score.pass_rate", "score.edit_sim"])[0] == "score.pass"
    assert dibia_columns(["score.pass", "score.chrf"]) is None


def test_columns_resolve_to_their_scorers():
    names = ["codebertscore", "edit_sim", "edit_sim.token", "pass_rate"]
    assert scorer_of("score.codebertscore.f1", names) == "codebertscore"
    assert scorer_of("score.edit_sim.token", names) == "edit_sim.token"  # an alias with a dot
    assert scorer_of("score.edit_sim", names) == "edit_sim"
    assert scorer_of("score.pass", names) == "pass_rate"  # pass_rate writes score.pass too
    assert scorer_of("score.bleu") == "bleu"
    with pytest.raises(ValueError, match="not a score column"):
        scorer_of("rating")


def test_feature_names_resolve():
    frame = study_frame(n_tasks=3)
    assert feature_columns(frame) == ["score.chrf", "score.edit_sim", "score.noise", "score.pass"]
    assert feature_columns(frame, ["chrf", "score.pass"]) == ["score.chrf", "score.pass"]
    with pytest.raises(ValueError, match="no such feature"):
        feature_columns(frame, ["bleu"])
    with pytest.raises(ValueError, match="named twice"):
        feature_columns(frame, ["chrf", "score.chrf"])


# ------------------------------------------------------------------------- the card


def test_card_validation_numbers_are_recomputable():
    frame = study_frame()
    card = quick_card(frame, seed=3)
    cv = card.data["cv"]
    assert cv["n_folds_run"] == 8 and cv["grouped_by"] == "task_id"
    splits = grouped_folds(frame["task_id"].to_numpy(), 4, 2, seed=3)
    combined = dibia_combined(frame["score.pass"], frame["score.edit_sim"])
    for i, (_, train, test) in enumerate(splits):
        y = frame["rating"].to_numpy()[test]
        tau = stats.kendalltau(frame["score.chrf"].to_numpy()[test], y).statistic
        assert cv["features"]["score.chrf"]["kendall"]["values"][i] == pytest.approx(tau)
        rho = stats.spearmanr(combined[test], y).statistic
        assert cv["dibia_combined"]["spearman"]["values"][i] == pytest.approx(rho)
        held_out = HybridMetric(bounds=(0, 4)).fit(
            frame[["score.chrf", "score.edit_sim", "score.noise"]].to_numpy()[train],
            frame["rating"].to_numpy()[train])
        predicted = held_out.predict(
            frame[["score.chrf", "score.edit_sim", "score.noise"]].to_numpy()[test])
        r = stats.pearsonr(predicted, y).statistic
        assert cv["hybrid"]["pearson"]["values"][i] == pytest.approx(r)
    values = cv["hybrid"]["kendall"]["values"]
    assert cv["hybrid"]["kendall"]["mean"] == pytest.approx(np.mean(values))
    assert cv["hybrid"]["kendall"]["sd"] == pytest.approx(np.std(values, ddof=1))
    comparison = cv["comparisons"]["kendall"]
    assert comparison["best_feature"] == "score.chrf"
    assert comparison["beats_best_feature"] is True and comparison["gain"] > 0.05
    # the corrected resampled t-test, by hand: 8 folds of 4, so n_test/n_train = 1/3
    gain = (np.array(cv["hybrid"]["kendall"]["values"])
            - np.array(cv["features"]["score.chrf"]["kendall"]["values"]))
    t = gain.mean() / np.sqrt((1 / 8 + 1 / 3) * gain.var(ddof=1))
    assert comparison["t"] == pytest.approx(t)
    assert comparison["p"] == pytest.approx(stats.t.sf(t, 7))
    assert set(cv["comparisons"]) == {"kendall", "spearman", "pearson"}
    pearson = cv["comparisons"]["pearson"]
    best = max(card.features, key=lambda c: np.mean(cv["features"][c]["pearson"]["values"]))
    assert pearson["best_feature"] == best
    assert pearson["hybrid_value"] == pytest.approx(cv["hybrid"]["pearson"]["mean"])
    summary = card.summary()
    assert f"kendall   hybrid {comparison['hybrid_value']:.3f}, best feature score.chrf" in summary
    assert f"p {comparison['p']:.3g}" in summary


def test_a_feature_of_any_finite_size_gets_the_same_weights():
    """A feature times 1e300 or 1e307 (its squares, then its sums, overflow) gets the weight per
    SD and the predictions it gets as it is, and is found collinear with a copy of itself (a
    fit that failed: "Out of range float values are not JSON compliant", "array must not contain
    infs or NaNs")."""
    frame = study_frame().assign(**{"score.twin": lambda f: f["score.chrf"]})
    signatures = {**SIGNATURES, "twin": "twin|v1"}
    options = {"features": ["chrf", "edit_sim", "twin"], "scorer_signatures": signatures}
    plain = quick_card(frame, n_boot=5, **options)
    assert plain.data["training"]["collinear"] == [["score.chrf", "score.twin", 1.0]]
    for factor in (1e300, 1e307):
        scaled = frame.assign(**{"score.chrf": frame["score.chrf"] * factor})
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            card = quick_card(scaled, n_boot=5, **options)
        assert card.data["weights"]["score.chrf"]["value"] == pytest.approx(
            plain.data["weights"]["score.chrf"]["value"], rel=1e-12)
        assert card.data["training"]["collinear"] == plain.data["training"]["collinear"]
        np.testing.assert_allclose(card.apply(scaled, signatures),
                                   plain.apply(frame, signatures), rtol=1e-12, atol=1e-12)


def test_the_summary_shows_a_bidi_override_as_its_code():
    name = "value\u202e"
    frame = study_frame()
    card = quick_card(frame.assign(**{name: frame["rating"]}), target=name, n_boot=0)
    summary = card.summary()
    assert "\u202e" not in summary and "held-out agreement with value\\u202e:" in summary
    card.data["signature"] += "|note:\u202eevil"  # (a loaded card's, which no hash covers)
    assert "\u202e" not in card.summary() and "note:\\u202eevil" in card.summary()


def test_a_one_feature_hybrid_does_not_beat_that_feature():
    # A positive weight keeps the feature's order, so the held-out taus are equal: gain 0.
    card = quick_card(study_frame(), features=["chrf"], scale=(-10, 10), n_boot=0)
    for held_out in card.data["cv"]["comparisons"].values():
        assert held_out["gain"] == pytest.approx(0.0, abs=1e-12)
        assert held_out["beats_best_feature"] is False and held_out["wins"] == 0
        assert held_out["p"] is None  # (no difference varies: no test)
    assert "best feature score.chrf" in card.summary() and "p n/a" in card.summary()
    assert card.data["weights"]["score.chrf"]["ci"] is None


def test_card_weights_cis_and_calibration():
    card = quick_card(study_frame())
    weights = card.data["weights"]
    assert weights["score.chrf"]["per_unit"] == pytest.approx(2.0, abs=0.1)
    assert weights["score.edit_sim"]["per_unit"] == pytest.approx(1.0, abs=0.1)
    for name in ("score.chrf", "score.edit_sim"):
        low, high = weights[name]["per_unit_ci"]
        assert low <= weights[name]["per_unit"] <= high
        std = next(f["std"] for f in card.data["features"] if f["name"] == name)
        assert weights[name]["ci"] == pytest.approx([low * std, high * std])
    assert all(w["value"] >= 0 and w["ci"][0] >= 0 for w in weights.values())
    table = card.data["calibration"]["table"]
    assert sum(b["n"] for b in table) == 240 and len(table) == 10
    assert all(a["hi"] <= b["lo"] for a, b in zip(table, table[1:], strict=False))
    assert table[0]["observed"] < table[-1]["observed"]
    assert card.data["training"]["n_tasks"] == 60 and card.data["training"]["n_rows"] == 240
    assert card.data["features"][0]["signature"] == SIGNATURES["chrf"]


def test_the_calibration_table_keeps_equal_predictions_in_one_bin():
    """Equal-count bins split equal predictions by the rows' order: two bins both said
    "predicted 2.0" with other observed means, and the table changed with the rows reversed."""
    from hybridmetric.combine import _calibration_table

    predicted = np.array([2.0, 2, 2, 2, 1, 1, 0, 2, 2, 1, 0, 2])
    observed = np.arange(12.0)
    table = _calibration_table(predicted, observed)
    assert [(b["lo"], b["hi"], b["n"]) for b in table] == [(0, 0, 2), (1, 1, 3), (2, 2, 7)]
    assert table[2]["observed"] == pytest.approx(np.mean([0, 1, 2, 3, 7, 8, 11]))
    assert _calibration_table(predicted[::-1], observed[::-1]) == table
    spread = np.random.default_rng(0).random(95)  # (distinct values: ten bins of 9 or 10)
    assert [b["n"] for b in _calibration_table(spread, spread)] == [10] * 5 + [9] * 5
    runs = np.repeat(np.arange(4.0), [30, 1, 1, 28])  # a cut moves to the nearer end of a run
    assert [b["n"] for b in _calibration_table(runs, runs)] == [30, 2, 28]


@pytest.mark.parametrize("model", ["nonneg", "ridge", "mixed"])
def test_the_card_s_constants_give_the_hybrid_by_hand(model):
    """intercept + sum weight * z, and intercept_per_unit + sum per_unit * score, clipped to
    the scale, are the hybrid the card applies."""
    frame = study_frame()
    card = quick_card(frame, model=model, n_boot=0)
    d = card.data
    names = [f["name"] for f in d["features"]]
    raw = frame[names].to_numpy(dtype=float)
    z = (raw - [f["mean"] for f in d["features"]]) / [f["std"] for f in d["features"]]
    by_sd = d["intercept"] + z @ [d["weights"][n]["value"] for n in names]
    by_unit = d["intercept_per_unit"] + raw @ [d["weights"][n]["per_unit"] for n in names]
    np.testing.assert_allclose(by_sd, by_unit)
    np.testing.assert_allclose(card.apply(frame, SIGNATURES), np.clip(by_unit, *d["scale"]))
    with warnings.catch_warnings():  # (fitted, as the card says, on named features)
        warnings.simplefilter("error")
        np.testing.assert_array_equal(card.estimator().predict(frame[card.features]),
                                      card.apply(frame, SIGNATURES))
    assert quick_card(frame, model="ordinal", n_boot=0).data["intercept_per_unit"] is None


def test_card_round_trips_and_is_deterministic(tmp_path):
    frame = study_frame()
    card = quick_card(frame, calibration="isotonic")
    path = card.save(tmp_path / "card.json")
    loaded = MetricCard.load(path)
    assert loaded.data == json.loads(path.read_text())
    assert loaded.data["format"] == CARD_FORMAT
    fresh = study_frame(seed=9)
    expected = HybridMetric(calibration="isotonic", bounds=(0, 4)).fit(
        frame[card.features].to_numpy(), frame["rating"].to_numpy()).predict(
        fresh[card.features].to_numpy())
    np.testing.assert_array_equal(loaded.apply(fresh, SIGNATURES), card.apply(fresh, SIGNATURES))
    np.testing.assert_allclose(loaded.apply(fresh, SIGNATURES), expected, atol=1e-12)
    again = quick_card(frame, calibration="isotonic")
    assert again.data == card.data
    (tmp_path / "other.json").write_text(json.dumps({"format": "comet/1"}))
    with pytest.raises(ValueError, match="not a metric card"):
        MetricCard.load(tmp_path / "other.json")
    truncated = {k: v for k, v in card.data.items() if k != "weights"}
    (tmp_path / "truncated.json").write_text(json.dumps(truncated))
    with pytest.raises(ValueError, match=r"lacks \['weights'\]"):
        MetricCard.load(tmp_path / "truncated.json")
    with pytest.raises(ValueError, match="cannot read the metric card .*none.json: No such file"):
        MetricCard.load(tmp_path / "none.json")
    (tmp_path / "latin.json").write_bytes(b'{"x": "\xe9"}')
    with pytest.raises(ValueError, match="cannot read the metric card .*latin.json: 'utf-8'"):
        MetricCard.load(tmp_path / "latin.json")


def test_a_nonneg_fit_whose_weights_are_all_zero_is_refused():
    """Ratings where lower is better (4 - rating): no feature rises with them, every nonneg
    weight is 0 and the hybrid a constant, which fit wrote as a card; it says why, and what to
    do (ridge takes negative weights)."""
    frame = study_frame().assign(rating=lambda f: 4 - f["rating"])
    with pytest.raises(DegenerateFitError, match=r"every weight of the nonneg model is 0: none "
                                                 r"of score.chrf, score.edit_sim, score.noise "
                                                 r"rises with 'rating'.*--model ridge"):
        quick_card(frame, n_boot=0)
    ridge = quick_card(frame, model="ridge", n_boot=0)
    assert ridge.data["weights"]["score.chrf"]["value"] < 0


def test_a_card_edited_after_the_fit_is_refused_as_it_is_read(tmp_path):
    """Its signature signs a hash of its content: a weight, the scale or the calibration edited
    by hand (which changed every score.hybrid under the same signature) is refused, as is a
    card whose signature records no such hash; a key's order or the file's spacing is not an
    edit."""
    card = quick_card(study_frame(), calibration="isotonic", n_boot=0)
    assert card.data["signature"].startswith(f"content:{card_content_hash(card.data)}|")
    path = card.save(tmp_path / "card.json")
    data = json.loads(path.read_text())
    (tmp_path / "spaced.json").write_text(json.dumps(dict(reversed(data.items())), indent=1))
    assert MetricCard.load(tmp_path / "spaced.json").data == card.data
    feature = card.features[0]
    edits = {"weight": lambda d: d["weights"][feature].update(value=100.0),
             "scale": lambda d: d.update(scale=[4, 0]),
             "calibration": lambda d: d["calibration"].update(method="clip"),
             "model": lambda d: d.update(model="quantum")}
    for name, edit in edits.items():
        edited = json.loads(path.read_text())
        edit(edited)
        (tmp_path / f"{name}.json").write_text(json.dumps(edited))
        with pytest.raises(ValueError, match=f"{name}.json: its content is not what its "
                                             "signature signs"):
            MetricCard.load(tmp_path / f"{name}.json")
    unsigned = {**data, "signature": data["signature"].split("|", 1)[1]}
    (tmp_path / "unsigned.json").write_text(json.dumps(unsigned))
    with pytest.raises(ValueError, match="its signature records no hash of its content"):
        MetricCard.load(tmp_path / "unsigned.json")


def test_a_value_that_holds_the_signature_s_separators_forges_no_field(tmp_path):
    """A target named ``r|content:0`` (a value with the field separator, a backslash, a line
    end) is escaped in the signature: the card fitted on it loads back (its content hash is
    the one its signature signs), and parse() gives each value back as it was."""
    from hybridmetric.signature import parse, signature

    name = "r|content:0\\n\nx"
    frame = study_frame()
    card = quick_card(frame.assign(**{name: frame["rating"]}), target=name, n_boot=0)
    assert "\n" not in card.data["signature"]
    assert MetricCard.load(card.save(tmp_path / "card.json")).data == card.data
    fields = parse(card.data["signature"])
    assert fields["content"] == card_content_hash(card.data) and fields["target"] == name
    given = {"a": "x|y", "b": "back\\slash|", "c": "\r\n", "d": 0.1, "e": None}
    assert parse(signature(given)) == {"a": "x|y", "b": "back\\slash|", "c": "\r\n",
                                       "d": "0.1", "e": "none"}
    assert signature({"a": "plain text: 1"}) == "a:plain text: 1"  # (most values as before)
    assert parse("a:1|b:x\\") == {"a": "1", "b": "x\\"}  # (a last lone backslash kept)


@pytest.mark.parametrize("model", ["ordinal", "mixed"])
def test_rater_models_card_round_trip(tmp_path, model):
    frame = study_frame(n_tasks=30)
    card = quick_card(frame, model=model, n_boot=5)
    assert card.data["training"]["n_rater_rows"] == 3 * len(frame)
    loaded = MetricCard.load(card.save(tmp_path / "card.json"))
    np.testing.assert_allclose(loaded.apply(frame, SIGNATURES), card.apply(frame, SIGNATURES),
                               rtol=0, atol=1e-12)
    assert card.data["cv"]["hybrid"]["kendall"]["mean"] > 0.6
    assert ("ordinal" in card.data) == (model == "ordinal")


def test_rater_models_check_the_grades_of_a_table_made_in_python():
    """A rater named by an int (which str() would merge with "1") is an error naming its row;
    null grades (None, NaN) are not graded, as the readers take them: the same card as
    without them."""
    frame = study_frame(n_tasks=20)
    bad = frame.copy()
    bad.at[bad.index[4], "ratings"] = {1: 2.0, "1": 3.0}
    with pytest.raises(ValueError, match=r"row 4, field 'ratings': a rater is named by a int"):
        quick_card(bad, model="mixed", n_boot=0)
    holes = frame.copy()
    holes["ratings"] = [{**grades, "absent": None if k % 2 else math.nan}
                        for k, grades in enumerate(holes["ratings"])]
    card = quick_card(holes, model="mixed", n_boot=0)
    assert card.data["training"]["n_rater_rows"] == 3 * len(frame)
    assert card.data["weights"] == quick_card(frame, model="mixed", n_boot=0).data["weights"]


def test_mismatched_card_is_refused():
    card = quick_card(study_frame(n_tasks=20), n_boot=0)
    frame = study_frame(n_tasks=5)
    other = dict(SIGNATURES, chrf="scorer:chrf|v:2|nrefs:best")
    with pytest.raises(CardMismatchError, match=r"score\.chrf: differs in v") as error:
        card.apply(frame, other)
    assert "scorer:chrf|v:2|nrefs:best" in str(error.value)
    assert "score.edit_sim" not in str(error.value)
    with pytest.raises(CardMismatchError, match="no signature for scorer 'noise'"):
        card.apply(frame, {k: v for k, v in SIGNATURES.items() if k != "noise"})
    with pytest.raises(CardMismatchError, match="score.edit_sim: column missing"):
        card.apply(frame.drop(columns="score.edit_sim"), SIGNATURES)


def test_a_target_or_feature_that_holds_text_is_refused_by_its_line(tmp_path):
    """Text is never a missing value, nor a number read from it: "n/a" and "4.0" alike are
    refused, with where they are, under either way of treating missing values."""
    frame = study_frame(n_tasks=20)
    frame["grade_text"] = ["n/a" if k % 2 == 0 else f"{k % 5}.0" for k in range(len(frame))]
    path = tmp_path / "scores.jsonl"
    write_generations(frame, path)
    table = read_generations(path)
    for missing in ("refuse", "drop-rows"):
        with pytest.raises(ValueError, match=rf"column 'grade_text' is not numeric: {path}, "
                                             r"line 1 holds 'n/a' \(79 more"):
            quick_card(table, target="grade_text", missing=missing, n_boot=0)
    numbers_as_text = table.assign(**{"score.chrf": table["score.chrf"].map(str)})
    with pytest.raises(ValueError, match=r"column 'score.chrf' is not numeric: .*line 1 holds '"):
        quick_card(numbers_as_text, n_boot=0)


def test_the_progress_bar_counts_every_fit(capsys):
    """folds x repeats, the full fit and each bootstrap resample: one tick each."""
    quick_card(study_frame(n_tasks=12), n_boot=7, progress=True)  # 4 x 2 + 1 + 7
    err = capsys.readouterr().err
    assert "fitting: 100%" in err and "16/16" in err, err
    quick_card(study_frame(n_tasks=12), n_boot=7, progress=False)
    assert "fitting" not in capsys.readouterr().err


def test_infinite_values_are_refused_or_dropped_as_missing_ones(tmp_path):
    """An infinite target or score is no number to fit on: named by its line, or dropped with
    missing='drop-rows'; a card gives a row with one no value."""
    frame = study_frame(n_tasks=20).assign(value=lambda f: f["rating"])
    frame.loc[4, "value"], frame.loc[9, "score.chrf"] = np.inf, -np.inf
    path = tmp_path / "scores.jsonl"
    write_generations(frame, path)
    table = read_generations(path)
    with pytest.raises(ValueError, match=rf"missing or infinite values:\n  value: 1 infinite, "
                                         rf"{path}, line 5 .*\n  score\.chrf: 1 infinite, "
                                         rf"{path}, line 10 "):
        quick_card(table, target="value", n_boot=0)
    card = quick_card(table, target="value", missing="drop-rows", n_boot=0)
    assert card.data["training"]["n_dropped_rows"] == 2
    hybrid = card.apply(table, SIGNATURES, missing="nan")
    assert np.isnan(hybrid[9]) and np.isfinite(np.delete(hybrid, 9)).all()


def test_missing_values_are_refused_or_dropped_explicitly(tmp_path):
    frame = study_frame(n_tasks=20)
    frame.loc[[3, 7], "score.pass"] = np.nan
    with pytest.raises(ValueError, match=r"score\.pass: 2 missing, row 3, row 7 \(tasks t0, ") as e:
        quick_card(frame, features=["chrf", "pass"])
    assert "--features score.chrf" in str(e.value)
    frame.loc[[0, 1, 2], "score.pass"] = np.nan  # (rows of one task name it once)
    with pytest.raises(ValueError, match=r"score\.pass: 5 missing, row 0, row 1, row 2, row 3, "
                                         r"row 7 \(tasks t0, t1\)"):
        quick_card(frame, features=["chrf", "pass"])
    frame.loc[[0, 1, 2], "score.pass"] = 1.0
    path = tmp_path / "scores.jsonl"  # read from a file: named by the file's lines
    write_generations(frame, path)
    with pytest.raises(ValueError, match=rf"score\.pass: 2 missing, {path}, lines 4, 8 \(tasks"):
        quick_card(read_generations(path), features=["chrf", "pass"])
    with pytest.raises(ValueError, match=rf"score\.pass: 1 missing, {path}, line 8 \(tasks"):
        quick_card(read_generations(path).iloc[5:], features=["chrf", "pass"])  # a part
    card = quick_card(frame, features=["chrf", "pass"], missing="drop-rows", n_boot=0)
    assert card.data["training"]["n_dropped_rows"] == 2 and card.data["training"]["n_rows"] == 78
    assert "2 rows with missing values dropped" in card.summary()
    assert card.data["features"][1] | {"mean": 0, "std": 0} == {
        "name": "score.pass", "scorer": "pass_rate", "signature": SIGNATURES["pass_rate"],
        "mean": 0, "std": 0, "distinct": 2}
    with pytest.raises(ValueError, match=r"score\.pass: 2 missing"):
        card.apply(frame, SIGNATURES)
    scored = card.apply(frame, SIGNATURES, missing="nan")
    assert np.isnan(scored[[3, 7]]).all() and not np.isnan(np.delete(scored, [3, 7])).any()
    no_dibia = quick_card(frame, features=["chrf"], n_boot=0)
    assert "score.pass" in no_dibia.data["cv"]["dibia_combined"]["skipped"]


def test_fit_card_refuses_bad_requests():
    frame = study_frame(n_tasks=10)
    with pytest.raises(ValueError, match="scorer_signatures is required"):
        quick_card(frame, scorer_signatures=None)
    with pytest.raises(ValueError, match=r"no signature for scorer\(s\) \['noise'\]"):
        quick_card(frame, scorer_signatures={"chrf": "a", "edit_sim": "b"})
    with pytest.raises(ValueError, match="target column 'value'"):
        quick_card(frame, target="value")
    with pytest.raises(ValueError, match="'ratings' column"):
        quick_card(frame.drop(columns="ratings"), model="ordinal")
    frame["score.noise"] = 0.5
    with pytest.raises(ValueError, match=r"\['score.noise'\] are constant .* \(--features"):
        quick_card(frame)


def test_read_scores_needs_its_signature_sidecar(tmp_path):
    frame = study_frame(n_tasks=2)
    path = write_generations(frame, tmp_path / "scores.jsonl")
    with pytest.raises(FileNotFoundError, match="signature.json"):
        read_scores(path)
    (tmp_path / "scores.jsonl.signature.json").write_text(json.dumps({"scorers": SIGNATURES}))
    with pytest.raises(ValueError, match="holds no 'rows_sha256'"):
        read_scores(path)
    (tmp_path / "scores.jsonl.signature.json").write_text(json.dumps(
        {"scorers": SIGNATURES, "rows_sha256": scores_hash(read_generations(path))}))
    read, signatures, hybrid = read_scores(path)
    assert signatures == SIGNATURES and hybrid is None
    np.testing.assert_allclose(read["score.chrf"], frame["score.chrf"])


@pytest.mark.skipif(os.getuid() != 0, reason="the full sandbox needs root")
def test_dibia_combined_scorer_by_hand():
    from hybridmetric.scorers.dibia_combined import DibiaCombined

    reference = "len(set(myList)) == 1"
    tests = {"language": "python", "prefix": "def f(myList):\n    return ", "suffix": "\n",
             "cases": ["\nassert f([1, 1]) == True\nassert f([1, 2]) == False\n"]}
    frame = pd.DataFrame({
        "task_id": ["a", "a", "b"],
        "candidate": ["len(set(myList)) <= 1", "len(set(myList)) == 2", reference],
        "references": [[reference], [reference], [reference]],
        "tests": [tests, tests, None],
    })
    with DibiaCombined(workers=1, timeout_s=5.0) as scorer:
        scored = scorer.score(frame)["score.dibia_combined"].to_numpy()
        text = scorer.signature()
    assert scored[0] == 1.0  # passes, though it differs from the reference
    assert scored[1] == pytest.approx(1 - 1 / len(reference))  # fails: one character to retype
    assert np.isnan(scored[2])  # no tests: PASS is not applicable, so neither is COMBINED
    assert "edit_level:char" in text and "pass_rate_v:" in text and "sandbox:" in text
    # a row whose tests no sandbox language runs stops the run before any row is scored, as
    # pass_rate's own check does
    frame.at[2, "tests"] = {**tests, "language": "cobol"}
    with DibiaCombined(workers=1, timeout_s=5.0) as scorer, pytest.raises(
            ValueError, match="cobol"):
        scorer.check(frame)


def test_out_of_fold_predictions_never_see_their_task():
    frame = study_frame()
    frame.loc[[5, 17], "score.edit_sim"] = np.nan
    card = quick_card(frame, missing="drop-rows")
    held_out = card.out_of_fold
    assert np.isnan(held_out[[5, 17]]).all() and np.isfinite(np.delete(held_out, [5, 17])).all()
    # Recompute one test fold by hand: fit on the other tasks only, predict this fold's rows.
    kept = frame.drop(index=[5, 17])
    _, _, test = grouped_folds(kept["task_id"].to_numpy(), 4, 1, 0)[0]  # quick_card: 4 folds
    test_tasks = set(kept["task_id"].iloc[test])
    train = kept[~kept["task_id"].isin(test_tasks)]
    columns = card.features
    model = HybridMetric(bounds=tuple(card.data["scale"])).fit(
        train[columns].to_numpy(), train["rating"].to_numpy())
    expected = model.predict(kept[columns].to_numpy()[test])
    np.testing.assert_allclose(held_out[kept.index[test]], expected)


def test_the_comparison_pairs_folds_where_both_taus_are_defined():
    nan = float("nan")
    per_fold = {"hybrid": {"kendall": [nan, 0.5, 0.2, 0.3]},
                "a": {"kendall": [0.1, nan, 0.4, 0.2]},  # mean 0.233: the best feature
                "b": {"kendall": [nan, nan, nan, nan]}}
    c = comparison(per_fold, ["a", "b"], "kendall", 4)
    assert c["best_feature"] == "a" and c["n_folds"] == 2  # folds 2 and 3
    assert c["hybrid_value"] == pytest.approx(0.25)
    assert c["best_feature_value"] == pytest.approx(0.3)
    assert c["gain"] == pytest.approx(-0.05) and c["wins"] == 1
    assert c["gain_sd"] == pytest.approx(np.std([-0.2, 0.1], ddof=1))
    undefined = comparison({"hybrid": {"kendall": [nan, nan]}, "a": {"kendall": [0.3, nan]}},
                           ["a"], "kendall", 2)
    assert undefined["gain"] is None and undefined["n_folds"] == 0
    assert not undefined["beats_best_feature"]
    json.dumps(undefined, allow_nan=False)
    # the best feature is chosen among those defined where the hybrid is
    disjoint = comparison({"hybrid": {"kendall": [nan, 0.3, 0.4]},
                           "a": {"kendall": [0.9, nan, nan]}, "b": {"kendall": [0.5, 0.5, 0.5]}},
                          ["a", "b"], "kendall", 3)
    assert disjoint["best_feature"] == "b" and disjoint["n_folds"] == 2
    # where each alone is defined, which the summary's table averages over
    assert (c["hybrid_folds"], c["best_feature_folds"]) == (3, 3)
    assert (disjoint["hybrid_folds"], disjoint["best_feature_folds"]) == (2, 3)


def test_kendall_s_verdict_is_explained_where_a_feature_of_few_values_wins_it():
    """Ratings made from the hybrid's own model: tau b still ranks a pass rate over 3 cases (4
    values) above the hybrid, as it leaves the pairs the feature ties out, where Pearson's r
    ranks the hybrid first; the summary says so (and not where the feature takes many values)."""
    rng = np.random.default_rng(7)
    n = 240
    a, b = rng.uniform(0, 1, n), rng.integers(0, 4, n) / 3
    rating = np.clip(np.floor(1 + 0.6 * a + 3.0 * b + rng.normal(0, 0.6, n) + 0.5), 0, 6)
    frame = pd.DataFrame({"task_id": np.repeat([f"t{i}" for i in range(60)], 4),
                          "candidate": "x", "rating": rating, "score.chrf": a,
                          "score.pass_rate": b})
    card = fit_card(frame, scorer_signatures=SIGNATURES, scale=(0, 6), n_boot=0)
    comparisons = card.data["cv"]["comparisons"]
    assert comparisons["kendall"]["best_feature"] == "score.pass_rate"
    assert not comparisons["kendall"]["beats_best_feature"]
    assert comparisons["pearson"]["beats_best_feature"]
    assert {f["name"]: f["distinct"] for f in card.data["features"]} == \
        {"score.chrf": 240, "score.pass_rate": 4}
    assert "(Kendall's best feature, score.pass_rate, takes 4 values: tau b" in card.summary()
    card.data["features"][1]["distinct"] = 11  # (many values: the note would not explain it)
    assert "Kendall's best feature" not in card.summary()


def test_a_card_of_before_with_kendall_s_comparison_alone_still_reads(tmp_path):
    """Cards fitted before the comparison was made by each statistic hold ``cv.comparison``
    (Kendall's, with no test; the oldest without the folds where each alone is defined)."""
    card = quick_card(study_frame(), n_boot=0)
    data = json.loads(json.dumps(card.data))
    new = data["cv"].pop("comparisons")["kendall"]
    data["cv"]["comparison"] = {
        "metric": "kendall", "best_feature": new["best_feature"],
        "best_feature_kendall": new["best_feature_value"], "hybrid_kendall": new["hybrid_value"],
        **{k: new[k] for k in ("gain", "gain_sd", "wins", "n_folds", "beats_best_feature")}}
    old = MetricCard(data)
    assert cv_comparisons(data["cv"]) == {"kendall": {**new, "t": None, "p": None}}
    assert "comparisons" not in data["cv"]  # (read, not rewritten)
    assert f"kendall  hybrid {new['hybrid_value']:.3f}" in old.summary()
    assert "p n/a" in old.summary()


def test_a_card_saves_when_no_fold_has_a_tau(tmp_path):
    frame = study_frame(n_tasks=4, per_task=2)
    frame["rating"] = np.repeat([1.0, 2.0, 3.0, 4.0], 2)  # constant within each held-out task
    card = quick_card(frame, folds=4, repeats=1, n_boot=0)
    assert all(c["gain"] is None for c in card.data["cv"]["comparisons"].values())
    assert "cannot be compared" in card.summary()
    assert MetricCard.load(card.save(tmp_path / "card.json")).data["cv"]["comparisons"] == \
        card.data["cv"]["comparisons"]


def test_a_fold_for_each_task_is_run_once():
    """With as many folds as tasks every repeat splits them alike: one repeat is run (ten
    would count ten copies of each fold, an SD too small and ten times the folds), and the card
    says so."""
    frame = study_frame(n_tasks=4, per_task=3)
    card = quick_card(frame, folds=4, repeats=10, n_boot=0)
    cv = card.data["cv"]
    assert (cv["repeats"], cv["n_folds_run"]) == (1, 4)
    assert len(cv["hybrid"]["pearson"]["values"]) == 4
    assert cv["note"] == ("a fold for each of the 4 tasks: every repeat would split them "
                          "alike, so 1 repeat was run, not 10")
    assert cv["note"] in card.summary()
    assert "note" not in quick_card(frame, folds=2, repeats=3, n_boot=0).data["cv"]


def test_ratings_outside_the_given_scale_are_refused():
    frame = study_frame()
    frame.loc[5, "rating"] = 4.5
    with pytest.raises(ValueError, match=r"1 rating\(s\) of 'rating' lie outside the scale 0 "
                                         r"to 4, e.g. 4.5 \(row 5, task 't1'\)"):
        quick_card(frame)


def test_a_rater_s_grade_outside_the_given_scale_is_refused_whatever_the_model():
    """A row's mean may lie within the scale while one of its grades does not (9 and 3 on a
    1-7 scale: a mean of 6); the grade is named by its row and rater."""
    frame = study_frame()
    rater = sorted(frame.loc[5, "ratings"])[0]
    frame.at[5, "ratings"] = {**frame.loc[5, "ratings"], rater: 5.0}
    for model in ("nonneg", "ordinal"):
        with pytest.raises(ValueError, match=rf"row 5, field 'ratings': rater '{rater}' gave "
                                             r"5.0, outside the scale 0 to 4 \(task 't1'\)"):
            quick_card(frame, model=model, n_boot=0)
    quick_card(frame, scale=(0, 5), n_boot=0)  # within a wider scale


def test_a_singular_mixed_model_says_what_to_do():
    frame = study_frame(n_tasks=20)
    frame["score.noise"] = frame["score.chrf"] * 2  # collinear
    with pytest.raises(DegenerateFitError, match="constant or the features are collinear"):
        quick_card(frame, model="mixed", n_boot=0)
    # a feature constant in a fold's training rows is named
    frame = study_frame(n_tasks=20)
    frame.loc[frame["task_id"] != "t0", "score.noise"] = 0.5
    with pytest.raises(DegenerateFitError, match=r"score\.noise constant on its training rows"):
        quick_card(frame, model="mixed", n_boot=0)


def test_a_non_integer_grade_for_the_ordinal_model_is_named():
    frame = study_frame(n_tasks=20)
    rater = sorted(frame.loc[7, "ratings"])[0]
    frame.at[7, "ratings"] = {**frame.loc[7, "ratings"], rater: 2.5}
    with pytest.raises(ValueError, match=rf"row 7 \(task 't1'\), rater '{rater}': the grade 2.5 "
                                         "is not an integer"):
        quick_card(frame, model="ordinal", n_boot=0)


def test_a_target_with_one_value_is_refused_as_the_audit_refuses_it():
    frame = study_frame(n_tasks=12)
    frame["rating"] = 2.0
    with pytest.raises(ValueError, match=r"'rating' takes one value on every training row \(2\)"):
        quick_card(frame)
    frame["score.chrf"] = frame["score.edit_sim"] = frame["score.noise"] = 0.5
    with pytest.raises(ValueError, match="'rating' takes one value"):  # (before the features)
        quick_card(frame)


def test_a_score_column_as_the_target_is_no_feature_of_itself():
    """A target that is a score column (``--target score.chrf``) is left out of the default
    features, refused as a named one, and the rater models, which learn the raters' grades of
    'rating', refuse it."""
    frame = study_frame(n_tasks=20)
    card = quick_card(frame, target="score.chrf", features=None)
    assert card.features == ["score.edit_sim", "score.noise", "score.pass"]
    assert card.data["cv"]["hybrid"]["pearson"]["mean"] < 0.9  # (no identity learnt)
    with pytest.raises(ValueError, match="the target 'score.chrf' is named as a feature too"):
        quick_card(frame, target="score.chrf", features=["chrf", "noise"])
    with pytest.raises(ValueError, match="grade of 'rating' .* not of the target 'score.chrf'"):
        quick_card(frame, target="score.chrf", features=["noise"], model="mixed")


def test_where_fits_the_card_of_the_rows_cut_by_hand():
    """``where``: the card of the rows pandas selects (same weights, CV, data hash), which
    records the selection; out-of-fold predictions stay aligned with the whole table."""
    frame = study_frame().assign(half=lambda f: np.where(f["task_id"].str[1:].astype(int) < 30,
                                                         "a", "b"))
    frame.loc[[5, 130], "score.edit_sim"] = np.nan
    chosen = quick_card(frame, missing="drop-rows", where=["half=b"])
    by_hand = quick_card(frame[frame["half"] == "b"].reset_index(drop=True), missing="drop-rows")
    for key in ("weights", "cv", "calibration"):
        assert chosen.data[key] == by_hand.data[key]
    assert chosen.data["training"] == {**by_hand.data["training"], "where": ["half=b"],
                                       "n_table_rows": 240}
    assert chosen.data["training"]["n_dropped_rows"] == 1  # (row 130: row 5 is not chosen)
    assert '|missing:drop-rows|where:["half=b"]|' in chosen.data["signature"]
    # (their contents differ in the training block's record of the selection alone)
    assert (re.sub(r"^content:\w+\|", "", chosen.data["signature"]).replace(
        '|where:["half=b"]', "") == re.sub(r"^content:\w+\|", "", by_hand.data["signature"]))
    held_out = chosen.out_of_fold
    assert held_out.shape == (240,) and np.isnan(held_out[:120]).all()
    np.testing.assert_array_equal(np.delete(held_out[120:], 10), np.delete(by_hand.out_of_fold,
                                                                           10))
    assert np.isnan(held_out[130])
    assert "the rows where half is 'b', of the table's 240" in chosen.summary()


def test_features_that_say_the_same_are_named_as_such():
    """Two CodeBERTScore F1s correlate at ~0.99: the hybrid splits their weight at random
    between them (an ordinal fit gave one +4.8 [-59.7, +10.1]), which the card and fit's text
    now say, with the pair and its r; features apart are named nowhere."""
    rng = np.random.default_rng(8)
    frame = pd.DataFrame({"task_id": np.repeat([f"t{k}" for k in range(20)], 4),
                          "system": np.tile(list("abcd"), 20), "score.x": rng.random(80),
                          "score.z": rng.random(80)})
    frame["score.y"] = frame["score.x"] + rng.normal(0, 0.01, 80)
    frame["rating"] = np.clip(np.round(4 * frame["score.x"] + rng.normal(0, 0.5, 80)), 0, 4)
    card = fit_card(frame, features=["score.x", "score.y", "score.z"], folds=4, repeats=1,
                    n_boot=20, scorer_signatures={"x": "x|1", "y": "y|1", "z": "z|1"})
    r = round(float(np.corrcoef(frame["score.x"], frame["score.y"])[0, 1]), 3)
    assert card.data["training"]["collinear"] == [["score.x", "score.y", r]] and r > 0.99
    assert (f"note: score.x and score.y correlate at {r:.3f} on the training rows: the hybrid "
            "cannot tell their weights apart") in card.summary()
    apart = fit_card(frame, features=["score.x", "score.z"], folds=4, repeats=1, n_boot=20,
                     scorer_signatures={"x": "x|1", "z": "z|1"})
    assert apart.data["training"]["collinear"] == [] and "correlate at" not in apart.summary()
