"""hybridmetric.audit: the results dict's numbers equal direct computations, and bad tables fail."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from hybridmetric import read_generations, stats, write_generations
from hybridmetric.audit import audit

SYSTEMS = ["alpha", "beta", "gamma", "delta"]


def _frame(seed: int = 0, n_tasks: int = 30) -> pd.DataFrame:
    """Tasks x systems with three raters per row, a good, a weak and a hybrid metric."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        difficulty = rng.normal()
        for s, system in enumerate(SYSTEMS):
            value = np.clip(s + difficulty + rng.normal(0, 1), 0, 4)
            grades = {f"r{k}": float(np.clip(np.round(value + rng.normal(0, 0.7)), 0, 4))
                      for k in rng.choice(5, 3, replace=False)}
            rows.append({
                "task_id": f"t{t}", "system": system, "candidate": "x",
                "rating": float(np.mean(list(grades.values()))), "ratings": grades,
                "score.good": value + rng.normal(0, 0.5),
                "score.weak": value + rng.normal(0, 2.5),
                "score.hybrid": value + rng.normal(0, 0.3),
            })
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def results(frame) -> dict:
    return audit(frame, seed=3, n_resamples=400, n_permutations=400)


def test_the_signature_names_what_changes_the_numbers(frame, results):
    """The focus decides the comparisons; the metrics (with drop-rows) the rows: a run that
    changes either signs differently."""
    other = audit(frame, seed=3, n_resamples=400, n_permutations=400, focus="score.good")
    assert other["comparisons"] != results["comparisons"]
    assert other["signature"] != results["signature"]
    fewer = audit(frame, metrics=["score.good", "score.hybrid"], seed=3, n_resamples=400,
                  n_permutations=400)
    assert fewer["signature"] != results["signature"]


def test_results_are_strict_json_with_the_documented_keys(results):
    text = json.dumps(results, allow_nan=False)
    assert json.loads(text) == results
    assert {"signature", "target", "n_rows", "n_tasks", "n_systems", "metrics", "focus",
            "agreement", "comparisons", "ceiling", "counts", "skipped", "settings"} <= set(results)
    assert (results["n_rows"], results["n_tasks"], results["n_systems"]) == (120, 30, 4)
    assert results["metrics"] == ["score.good", "score.weak", "score.hybrid"]
    assert results["focus"] == "score.hybrid"
    assert "seed:3" in results["signature"] and "boot:400" in results["signature"]
    assert "|metrics:score.good,score.weak,score.hybrid|focus:score.hybrid|" in results["signature"]
    assert results["skipped"] == [  # (4 candidates a task: rows that are not independent)
        "Williams tests at item level: the test takes rows as independent, and the rows of a "
        "task share its references (and their errors), which overstates its confidence; the "
        "permutation test swaps whole tasks"]
    assert all(row["p_williams"] is None for row in results["comparisons"]
               if row["level"] == "item")
    assert results["notes"] == [  # (4 systems: 2^4 patterns, the identity among them)
        "system-level permutation tests: with 4 systems no p-value is below 1/16 (the 16 ways "
        "to swap them), and Holm's correction over the 2 comparisons leaves none below 0.125: "
        "no difference there can be significant at 0.05"]
    assert all(row["p_permutation"] >= 1 / 16 for row in results["comparisons"]
               if row["level"] == "system")
    assert results["counts"] == {"within_task_pairs": 30 * 6,
                                 "human_tied_pairs": results["counts"]["human_tied_pairs"],
                                 "tasks_with_pairs": 30}


def test_agreement_values_equal_direct_statistics(frame, results):
    human = frame["rating"].to_numpy()
    groups = frame["task_id"].to_numpy()
    systems = frame["system"].to_numpy()
    for name in results["metrics"]:
        metric = frame[name].to_numpy()
        item = results["agreement"]["item"][name]
        for statistic in ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c"):
            assert item[statistic]["value"] == pytest.approx(
                stats.POINT_STATISTICS[statistic](metric, human))
        assert item["pairwise_accuracy"]["value"] == pytest.approx(
            stats.pairwise_accuracy(human, metric))
        within = results["agreement"]["within_task"][name]
        assert within["tau_darr"]["value"] == pytest.approx(stats.tau_darr(human, metric, groups))
        assert within["spearman"]["value"] == pytest.approx(
            np.nanmean(stats.per_group("spearman", human, metric, groups)))
        epsilon, accuracy = stats.tie_calibration(human, metric, groups)
        assert within["pairwise_accuracy_tc"]["value"] == pytest.approx(accuracy)
        assert within["pairwise_accuracy_tc"]["epsilon"] == epsilon
        system = results["agreement"]["system"][name]
        assert system["pearson"]["value"] == pytest.approx(stats.pearson(
            stats.system_means(metric, systems), stats.system_means(human, systems)))
        for level in results["agreement"].values():
            for estimate in level[name].values():
                lo, hi = estimate["ci"]
                assert lo <= hi and estimate["n_valid"] > 0


def test_comparisons_pit_the_focus_against_every_other_metric(frame, results):
    rows = results["comparisons"]
    assert len(rows) == 2 * 3
    assert {(r["level"], r["statistic"]) for r in rows} == {
        ("item", "pearson"), ("within_task", "tau_darr"), ("system", "pearson")}
    for row in rows:
        assert row["a"] == "score.hybrid" and row["b"] in ("score.good", "score.weak")
        assert row["delta"] == pytest.approx(row["value_a"] - row["value_b"])
        assert 1 / 401 <= row["p_permutation"] <= 1
        assert row["p_holm"] >= row["p_permutation"]
        lo, hi = row["ci"]
        assert lo <= hi
    weak = [r for r in rows if r["b"] == "score.weak" and r["level"] != "system"]
    assert all(r["p_permutation"] < 0.01 and r["ci"][0] > 0 for r in weak)
    item = next(r for r in rows if r["b"] == "score.weak" and r["statistic"] == "pearson"
                and r["level"] == "item")
    human = frame["rating"].to_numpy()
    assert item["p_williams"] is None  # (four rows a task: not independent)
    assert all(r["p_williams"] is None for r in rows if r["level"] == "within_task")
    # one row a task: independent rows, and the Williams test of them
    single = frame.drop_duplicates("task_id").reset_index(drop=True)
    human = single["rating"].to_numpy()
    h, w = single["score.hybrid"].to_numpy(), single["score.weak"].to_numpy()
    alone = audit(single, metrics=["score.hybrid", "score.weak"], n_resamples=50,
                  n_permutations=50, comparisons=[("item", "pearson")])
    assert alone["comparisons"][0]["p_williams"] == pytest.approx(stats.williams_test(
        stats.pearson(h, human), stats.pearson(w, human), stats.pearson(h, w), human.size))
    assert not any("Williams" in reason for reason in alone["skipped"])


def test_ceiling_from_per_rater_ratings(frame, results):
    ceiling = results["ceiling"]
    assert ceiling["n_raters"] == 5 and ceiling["n_ratings"] == 360
    raters = sorted({r for cell in frame["ratings"] for r in cell})
    matrix = np.array([[cell.get(r, np.nan) for cell in frame["ratings"]] for r in raters])
    assert ceiling["krippendorff_alpha"]["interval"] == pytest.approx(
        stats.krippendorff_alpha(matrix, "interval"))
    _, _, own, rest = stats.rater_vs_rest(matrix)
    lo_ro = ceiling["leave_one_rater_out"]
    assert lo_ro["item"]["pearson"]["value"] == pytest.approx(stats.pearson(own, rest))
    assert lo_ro["item"]["pearson"]["ci"][0] < lo_ro["item"]["pearson"]["value"]
    assert set(ceiling["per_rater"]) == set(raters)


def test_the_numbers_do_not_depend_on_the_scale_of_the_ratings_or_a_metric(frame):
    """Correlations and their tests are the same for ratings (or a metric) times 1e-160, 1e-15,
    1e160 or 1e307: no sum (or sum of squares) overflows or underflows, no system is
    taken as tied with another for a difference smaller than 1e-12 (a red team's ratings of
    1e-15: "every system has the same mean rating"; of 1e160: correlations of 0.000 [0.000,
    0.000]; a metric of 1e307: a Pearson r of null, and another focus metric)."""
    plain = frame.drop(columns=["ratings"])
    def numbers(table: pd.DataFrame) -> dict:
        result = audit(table, seed=3, n_resamples=100, n_permutations=100)
        return {"agreement": result["agreement"], "skipped": result["skipped"],
                "comparisons": [{k: v for k, v in row.items() if k != "delta"}
                                for row in result["comparisons"]]}
    expected = numbers(plain)
    assert set(expected["agreement"]) == {"item", "within_task", "system"}
    for column in ("rating", "score.weak"):
        for factor in (1e-160, 1e-15, 1e160, 1e307):
            scaled = numbers(plain.assign(**{column: plain[column] * factor}))
            assert _close(scaled, expected), (factor, column)


def _close(a: object, b: object) -> bool:
    """Equal nested results, floats to 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def test_the_mean_rating_s_reliability_and_what_a_perfect_metric_reaches(frame, results):
    """The two-way estimate, leniency fitted (three of five raters a row here), its square root
    what a perfect metric reaches; where every rater grades every row, with or without one
    grade, leniency does not lower it (a reviewer's case: raters 1 apart, where alpha's 0.77
    was below the 0.98 that the true score reaches); Spearman-Brown of alpha where the design
    cannot tell leniency apart; a reason where the target is not each row's mean grade, or a
    row has none."""
    mean = results["ceiling"]["mean_rating"]
    assert mean["method"].startswith("two-way")
    assert mean["raters_per_row"] == pytest.approx(3.0)
    raters = sorted({r for cell in frame["ratings"] for r in cell})
    matrix = np.array([[cell.get(r, np.nan) for cell in frame["ratings"]] for r in raters])
    assert mean["reliability"] == pytest.approx(stats.two_way_reliability(matrix))
    assert mean["perfect_metric_pearson"] == pytest.approx(math.sqrt(mean["reliability"]))
    one_each = frame.assign(ratings=[{f"own{i}-{k}": grade for k, grade in enumerate(g.values())}
                                     for i, g in enumerate(frame["ratings"])])
    fallback = audit(one_each, n_resamples=20, n_permutations=20)["ceiling"]
    assert fallback["mean_rating"]["method"].startswith("Spearman-Brown")
    assert fallback["mean_rating"]["reliability"] == pytest.approx(
        3 * fallback["krippendorff_alpha"]["interval"]
        / (1 + 2 * fallback["krippendorff_alpha"]["interval"]))
    rng = np.random.default_rng(1)
    truth = rng.normal(size=300)
    grades = truth[None, :] + np.array([[-1.0], [0.0], [1.0]]) + 0.3 * rng.normal(size=(3, 300))
    crossed = pd.DataFrame({"task_id": [f"t{i // 4}" for i in range(300)], "candidate": "x",
                            "rating": grades.mean(axis=0), "score.truth": truth,
                            "ratings": [{f"r{j}": float(grades[j, i]) for j in range(3)}
                                        for i in range(300)]})
    result = audit(crossed, n_resamples=20, n_permutations=20)
    mean = result["ceiling"]["mean_rating"]
    assert mean["method"].startswith("two-way")
    reached = result["agreement"]["item"]["score.truth"]["pearson"]["value"]
    assert mean["perfect_metric_pearson"] == pytest.approx(reached, abs=0.01)
    assert result["ceiling"]["krippendorff_alpha"]["interval"] < 0.4  # (leniency as error)
    crossed.at[0, "ratings"] = {"r1": crossed.at[0, "ratings"]["r1"]}  # (one rater, its mean)
    crossed.at[0, "rating"] = crossed.at[0, "ratings"]["r1"]
    less = audit(crossed, n_resamples=20, n_permutations=20)["ceiling"]["mean_rating"]
    assert less["perfect_metric_pearson"] == pytest.approx(reached, abs=0.01)
    cancelling = frame.copy()  # (grades whose mean is 0 but for rounding: 1.85e-17)
    cancelling.at[0, "ratings"] = {"r0": 0.1, "r1": 0.2, "r2": -0.3}
    cancelling.at[0, "rating"] = 0.0
    assert "method" in audit(cancelling, n_resamples=20, n_permutations=20)["ceiling"][
        "mean_rating"]
    median = frame.assign(rating=[float(np.median(list(g.values()))) for g in frame["ratings"]])
    assert audit(median, n_resamples=20, n_permutations=20)["ceiling"]["mean_rating"] == {
        "reason": "the target is not each row's mean grade over its raters"}
    ungraded = frame.copy()
    ungraded.at[3, "ratings"] = None
    assert audit(ungraded, n_resamples=20, n_permutations=20)["ceiling"]["mean_rating"] == {
        "reason": "1 of the rows audited have no grade in 'ratings': their target is no mean of "
                  "raters"}


@pytest.mark.parametrize(("grades", "problem"), [
    ({1: 0.0, "1": 4.0}, "a rater is named by a int, not a string: 1"),
    ({"r0": "3", "r1": 2.0}, "rater 'r0' has a non-numeric grade '3'"),
    ({"r0": True, "r1": 2.0}, "rater 'r0' has a non-numeric grade True"),
    ({"r0": math.inf, "r1": 2.0}, "rater 'r0' has a grade that is not finite: inf"),
    ([3.0, 2.0], "expected an object of rater -> number, got list"),
])
def test_grades_a_table_made_in_python_holds_are_checked_as_the_readers_check_them(
        frame, grades, problem):
    """A table built in Python, which no reader checked: a grade the readers refuse (an int
    rater that str() would merge with "1", a grade in a string, a bool, infinity) is an error
    naming its row, not a grade merged, read as a number or dropped."""
    bad = frame.copy()
    bad.at[bad.index[7], "ratings"] = grades
    with pytest.raises(ValueError, match=re.escape(f"row 7, field 'ratings': {problem}")):
        audit(bad, n_resamples=20, n_permutations=20)


def test_ungraded_cells_and_grades_are_left_out_of_the_ceiling(frame, results):
    """None, NaN and pd.NA grades, and rows without ratings, are not graded, as the readers
    take null: the ceiling counts the other ratings."""
    holes = frame.copy()
    first = dict(holes.at[0, "ratings"])
    holes.at[0, "ratings"] = {**first, "extra": None}
    holes.at[1, "ratings"] = {**holes.at[1, "ratings"], "extra": math.nan}
    holes.at[2, "ratings"] = {**holes.at[2, "ratings"], "extra": pd.NA}
    holes.at[3, "ratings"] = None
    ceiling = audit(holes, seed=3, n_resamples=50, n_permutations=50)["ceiling"]
    assert ceiling["n_ratings"] == results["ceiling"]["n_ratings"] - len(frame.at[3, "ratings"])


def test_ceiling_needs_three_rows_rated_twice_not_three_pairs(frame):
    """Two rows of two raters make four rater-vs-rest pairs, each row's two mirror images of
    each other (their correlation is -1): no ceiling, and the reason."""
    sparse = frame.copy()
    sparse["ratings"] = [dict(list(g.items())[:2]) if k < 2 else dict(list(g.items())[:1])
                         for k, g in enumerate(sparse["ratings"])]
    ceiling = audit(sparse, seed=3, n_resamples=50, n_permutations=50)["ceiling"]
    assert ceiling == {"reason": "fewer than 3 rows are rated by two or more raters"}


def test_same_seed_same_numbers_other_seed_other_intervals(frame, results):
    again = audit(frame, seed=3, n_resamples=400, n_permutations=400)
    assert again == results
    other = audit(frame, seed=4, n_resamples=400, n_permutations=400)
    key = other["agreement"]["item"]["score.good"]["pearson"]
    assert key["value"] == results["agreement"]["item"]["score.good"]["pearson"]["value"]
    assert key["ci"] != results["agreement"]["item"]["score.good"]["pearson"]["ci"]


def test_named_focus_and_missing_pieces(frame):
    small = frame[["task_id", "candidate", "rating", "score.good", "score.weak"]]
    result = audit(small, focus="score.weak", n_resamples=50, n_permutations=50)
    assert result["focus"] == "score.weak" and result["focus_rule"] == "named"
    assert "system" not in result["agreement"] and result["n_systems"] is None
    assert any("no 'system' column" in reason for reason in result["skipped"])
    assert "reason" in result["ceiling"]
    assert {r["level"] for r in result["comparisons"]} == {"item", "within_task"}
    best = audit(small, n_resamples=50, n_permutations=50)
    assert best["focus"] == "score.good" and best["focus_rule"] == "best item pearson"


def test_metrics_are_named_as_fit_names_its_features(frame):
    small = frame[["task_id", "candidate", "rating", "score.good", "score.weak"]]
    named = audit(small, metrics=["good", "score.weak"], focus="weak", n_resamples=50,
                  n_permutations=50)
    assert named["focus"] == "score.weak" and set(named["agreement"]["item"]) == {
        "score.good", "score.weak"}
    with pytest.raises(ValueError, match=r"no metric column 'nope' in the table; its score "
                                         r"columns are score\.good, score\.weak"):
        audit(small, metrics=["nope"], n_resamples=50, n_permutations=50)
    with pytest.raises(ValueError, match=r"\(--useful\) 9 lies outside the rating scale 0 to 4"):
        audit(small, useful_threshold=9, scale=(0, 4), n_resamples=50, n_permutations=50)


def test_a_metric_constant_over_the_systems_is_not_permuted_there(frame):
    """Its rows differ, its system means do not (each system passes half its tasks): no
    system-level permutation test (z-scoring them would fail), the other levels go on."""
    table = frame.copy()
    table["score.half"] = table.groupby("system").cumcount() % 2 * 1.0
    result = audit(table, metrics=["score.hybrid", "score.half"], n_resamples=20,
                   n_permutations=20)
    assert ("permutation tests score.hybrid vs score.half: score.half is constant at the system "
            "level") in result["skipped"]
    p = {r["level"]: r["p_permutation"] for r in result["comparisons"]
         if r["statistic"] == "pearson"}
    assert p["system"] is None and p["item"] is not None


def test_spearman_comparison_and_a_constant_metric(frame):
    table = frame.assign(**{"score.flat": 0.5})
    result = audit(table, metrics=["score.hybrid", "score.good", "score.flat"], n_resamples=50,
                   n_permutations=50, comparisons=[("item", "spearman")])
    rows = {r["b"]: r for r in result["comparisons"]}
    assert rows["score.good"]["p_permutation"] is not None
    assert rows["score.good"]["p_holm"] == rows["score.good"]["p_permutation"]
    assert rows["score.flat"]["p_permutation"] is None and rows["score.flat"]["delta"] is None
    assert any("score.flat is constant" in reason for reason in result["skipped"])
    assert result["agreement"]["item"]["score.flat"]["pearson"]["value"] is None
    assert ("score.flat takes one value on every row: its correlations are undefined, and "
            "within tasks it tells apart none of the rows") in " ".join(result["notes"])
    assert result["agreement"]["within_task"]["score.flat"]["tau_darr"]["value"] == 0.0
    json.dumps(result, allow_nan=False)
    # said once, however many levels and statistics are compared
    every = audit(table, metrics=["score.hybrid", "score.flat"], n_resamples=20,
                  n_permutations=20)
    assert len(every["comparisons"]) > 1
    assert [r for r in every["skipped"] if "is constant" in r] == [
        "permutation tests score.hybrid vs score.flat: score.flat is constant"]


def test_bad_tables_fail_with_a_message(frame):
    broken = frame.copy()
    broken.loc[5, "rating"] = np.nan
    broken.loc[[2, 7], "score.good"] = [np.nan, np.inf]
    with pytest.raises(ValueError, match=r"(?s)missing or infinite values:\n  rating: 1 missing,"
                                         r" row 5 .*\n  score.good: 2 missing or infinite, row "
                                         r"2, row 7 .*\nfilter those rows before the audit"):
        audit(broken, n_resamples=10, n_permutations=10)
    with pytest.raises(ValueError, match="no 'score"):
        audit(frame[["task_id", "rating"]], n_resamples=10, n_permutations=10)
    with pytest.raises(ValueError, match="no metric column 'score.nope' in the table"):
        audit(frame, focus="score.nope", n_resamples=10, n_permutations=10)
    with pytest.raises(ValueError, match="not among the audited metrics"):
        audit(frame, metrics=["good", "weak"], focus="hybrid", n_resamples=10,
              n_permutations=10)
    with pytest.raises(ValueError, match="no column 'value'"):
        audit(frame, target="value", n_resamples=10, n_permutations=10)
    odd = frame.copy()
    odd["ratings"] = [dict(cell) for cell in odd["ratings"]]
    odd.loc[7, "ratings"]["r9"] = "good"
    with pytest.raises(ValueError, match="row 7, field 'ratings': rater 'r9'"):
        audit(odd, n_resamples=10, n_permutations=10)
    text = frame.assign(**{"score.good": "high"})
    with pytest.raises(ValueError, match="'score.good' is not numeric: row 0 holds 'high'"):
        audit(text, n_resamples=10, n_permutations=10)
    with pytest.raises(ValueError, match="'score.good' is not numeric: row 0 holds 'high'"):
        audit(text, n_resamples=10, n_permutations=10, missing="drop-rows")
    grades = frame.assign(grade=["n/a", *map(str, frame["rating"].iloc[1:])])  # "2.0": text
    with pytest.raises(ValueError, match=r"'grade' is not numeric: row 0 holds 'n/a' \(\d+ more"):
        audit(grades, target="grade", n_resamples=10, n_permutations=10, missing="drop-rows")


def test_a_rater_s_grade_outside_the_scale_is_refused(frame):
    """Each rater's grade, not only the row's rating, must lie on the scale: the grades feed
    the raters' agreement and the human ceiling."""
    graded = frame.assign(ratings=[{"a": float(r), "b": float(r)} for r in frame["rating"]])
    audit(graded, n_resamples=10, n_permutations=10, scale=(0, 4))
    graded.at[3, "ratings"] = {"a": 9.0, "b": float(graded.loc[3, "rating"])}
    with pytest.raises(ValueError, match=r"row 3, field 'ratings': rater 'a' gave 9.0, outside "
                                         r"the scale 0 to 4"):
        audit(graded, n_resamples=10, n_permutations=10, scale=(0, 4))


def test_rater_grades_are_held_to_the_scale_of_rating_only(frame):
    """The grades behind ``rating`` share its scale; another target has a scale of its own."""
    graded = frame.assign(ratings=[{"a": 5.0} for _ in range(len(frame))],
                          useful=(frame["rating"] >= 2).astype(float))
    audit(graded, target="useful", scale=(0, 1), n_resamples=10, n_permutations=10)


def test_numbers_in_a_csv_file_s_own_columns_are_numbers(frame, tmp_path):
    """A CSV file holds text: its "2.5" is a number in any column given as the target; text
    that is no number ("n/a") is still refused, by its row."""
    path = tmp_path / "scores.csv"
    write_generations(frame.assign(usefulness=frame["rating"] / 2), path)
    table = read_generations(path)
    assert isinstance(table["usefulness"].iloc[0], str)  # (as read: text)
    result = audit(table, target="usefulness", n_resamples=10, n_permutations=10)
    assert result["n_rows"] == len(frame)
    # (a table with per-rater grades: they grade 'rating'; one without: it has none)
    assert result["ceiling"]["reason"] == ("the raters' grades ('ratings') grade 'rating', not "
                                           "the target 'usefulness'")
    alone = audit(table.drop(columns="ratings"), target="usefulness", n_resamples=10,
                  n_permutations=10)
    assert alone["ceiling"]["reason"] == ("the table has no per-rater 'ratings' column (rater "
                                          "-> rating)")
    table.loc[4, "usefulness"] = "n/a"
    with pytest.raises(ValueError, match=rf"'usefulness' is not numeric: {path}, row 6 holds "
                                         "'n/a'"):
        audit(table, target="usefulness", n_resamples=10, n_permutations=10)


def test_a_bad_row_is_named_by_its_line_in_the_file(frame, tmp_path):
    """Rows read from a file are named by the file and its line, not by their position."""
    path = tmp_path / "scores.jsonl"
    write_generations(frame.iloc[:40], path)
    text = path.read_text().splitlines()
    text.insert(0, "")  # a blank line: line numbers and positions part
    path.write_text("\n".join(text) + "\n")
    table = read_generations(path)
    table.loc[5, "rating"] = np.nan
    with pytest.raises(ValueError, match=rf"rating: 1 missing, {path}, line 7 "):
        audit(table, n_resamples=10, n_permutations=10)
    grades = table.assign(ratings=[{"a": 1.0}] * len(table))
    grades.at[3, "ratings"] = {"a": "x"}
    with pytest.raises(ValueError, match=rf"{path}, line 5, field 'ratings': rater 'a'"):
        audit(grades.assign(rating=1.0 + np.arange(len(table)) % 3), n_resamples=10,
              n_permutations=10)
    # after rows are dropped (row 5 lacks its rating), the rest keep their lines
    grades.at[3, "ratings"] = {"a": 1.0}
    grades.at[8, "ratings"] = {"a": "x"}
    with pytest.raises(ValueError, match=rf"{path}, line 10, field 'ratings': rater 'a'"):
        audit(grades, n_resamples=10, n_permutations=10, missing="drop-rows")


def test_item_pair_statistics_are_left_out_above_the_row_limit(frame, monkeypatch):
    monkeypatch.setattr("hybridmetric.stats.MAX_PAIR_ROWS", 100)
    result = audit(frame, n_resamples=50, n_permutations=50)
    item = result["agreement"]["item"]["score.good"]
    assert set(item) == {"pearson", "spearman", "kendall_tau_b", "kendall_tau_c"}
    assert item["kendall_tau_b"]["ci"] is None
    assert item["kendall_tau_b"]["value"] == pytest.approx(stats.kendall_tau_b(
        frame["score.good"].to_numpy(), frame["rating"].to_numpy()))
    assert any("exceed 100" in reason for reason in result["skipped"])
    with pytest.raises(ValueError, match="limit is 100 rows"):
        stats.pairwise_accuracy(frame["rating"].to_numpy(), frame["score.good"].to_numpy())


def test_missing_values_refused_or_dropped_explicitly():
    rng = np.random.default_rng(3)
    n = 60
    frame = pd.DataFrame({"task_id": np.repeat(np.arange(20), 3).astype(str),
                          "system": np.tile(["a", "b", "c"], 20),
                          "rating": rng.integers(0, 5, n).astype(float),
                          "score.x": rng.random(n), "score.y": rng.random(n)})
    frame.loc[[4, 7], "score.y"] = np.nan
    with pytest.raises(ValueError, match="score.y"):
        audit(frame, n_resamples=50, n_permutations=50)
    dropped = audit(frame, n_resamples=50, n_permutations=50, missing="drop-rows")
    complete = audit(frame.drop(index=[4, 7]).reset_index(drop=True), n_resamples=50,
                     n_permutations=50)
    assert dropped["n_dropped_rows"] == 2 and dropped["n_rows"] == n - 2
    assert dropped["dropped"] == {"by_column": {"score.y": 2}, "n_tasks": 0}
    frame.loc[[0, 1, 2], "rating"] = np.nan  # (task 0 whole)
    again = audit(frame, n_resamples=50, n_permutations=50, missing="drop-rows")
    assert again["dropped"] == {"by_column": {"rating": 3, "score.y": 2}, "n_tasks": 1}
    assert "dropped" not in complete
    assert dropped["agreement"] == complete["agreement"]


def test_systems_named_by_every_row_or_by_none(frame):
    partly = frame.copy()
    partly.loc[[3, 8, 9], "system"] = None
    with pytest.raises(ValueError, match=r"'system' is missing in 3 of 120 rows \(row 3, row 8, "
                                         r"row 9\): give every row its system, or none"):
        audit(partly, n_resamples=10, n_permutations=10)
    unnamed = audit(frame.assign(system=None), n_resamples=50, n_permutations=50)
    assert "system" not in unnamed["agreement"] and unnamed["n_systems"] is None
    assert "system level: no row names its system" in unnamed["skipped"]
    assert unnamed["agreement"] == audit(frame.drop(columns="system"), n_resamples=50,
                                         n_permutations=50)["agreement"]


def test_within_task_means_say_how_many_tasks_they_cover(frame):
    """A task with one row, or a constant rating, has no within-task correlation: the mean is
    over the others, and results and report say over how many."""
    few = frame.copy()
    tasks = few["task_id"].unique()
    few.loc[few["task_id"] == tasks[0], "rating"] = 2.0  # constant within the task
    few = few.drop(few.index[(few["task_id"] == tasks[1])][1:])  # one row left
    result = audit(few, metrics=["score.good"], n_resamples=20, n_permutations=20)
    within = result["agreement"]["within_task"]["score.good"]
    human, metric = few["rating"].to_numpy(), few["score.good"].to_numpy()
    groups = few["task_id"].to_numpy()
    for name in ("pearson", "spearman", "kendall_tau_b"):
        defined = np.isfinite(stats.per_group(name, human, metric, groups)).sum()
        assert within[name]["n_tasks"] == defined == len(tasks) - 2
    # (DARR counts the pairs whose ratings differ: the constant task has none)
    assert within["tau_darr"]["n_tasks"] == len(tasks) - 2
    from hybridmetric.report.tables import agreement_tables
    [table] = [t for t in agreement_tables(result) if "ithin" in t.title]
    assert (f"Over fewer of the {len(tasks)} tasks (those where the statistic is defined"
            in table.note)
    assert (f"score.good: tau darr {len(tasks) - 2}, pairwise accuracy {len(tasks) - 1},"
            in table.note)


def test_one_candidate_a_task_has_no_within_task_level(frame):
    single = frame[frame["system"] == "beta"].reset_index(drop=True)
    result = audit(single, n_resamples=50, n_permutations=50)
    assert set(result["agreement"]) == {"item"} and result["counts"]["within_task_pairs"] == 0
    assert any(reason.startswith("within-task level: no task has two rows")
               for reason in result["skipped"])
    pearson = result["agreement"]["item"]["score.good"]["pearson"]["value"]
    assert pearson == pytest.approx(np.corrcoef(single["score.good"], single["rating"])[0, 1])
    json.dumps(result, allow_nan=False)


def test_levels_whose_ratings_never_differ_are_left_out_with_the_reason(frame):
    """Each task rated alike throughout (its rows share one rating) and every system's mean
    rating the same: neither level's statistics could be anything but undefined or trivial (a
    metric that ties every pair scored 1 in pairwise accuracy), so both are left out, and the
    item level, where ratings differ between tasks, stays."""
    table = frame.copy()
    table["rating"] = table.groupby("task_id")["rating"].transform("first")
    result = audit(table.drop(columns="ratings"), n_resamples=50, n_permutations=50)
    assert set(result["agreement"]) == {"item"}
    assert ("within-task level: the ratings never differ within a task, so they tell no two "
            "candidates of a task apart") in result["skipped"]
    assert ("system level: every system has the same mean rating, so the ratings tell no two "
            "systems apart") in result["skipped"]
    pearson = result["agreement"]["item"]["score.good"]["pearson"]["value"]
    assert pearson == pytest.approx(np.corrcoef(table["score.good"], table["rating"])[0, 1])
    # one task whose ratings differ is enough for the within-task level
    table.loc[0, "rating"] = table.loc[1, "rating"] + 1
    assert "within_task" in audit(table.drop(columns="ratings"), n_resamples=50,
                                  n_permutations=50)["agreement"]
    json.dumps(result, allow_nan=False)


def test_a_metric_with_no_value_on_any_row_is_left_out(frame):
    """pass_rate on a study without tests: every other metric is audited on every row."""
    table = frame.assign(**{"score.pass_rate": np.nan})
    for missing in ("refuse", "drop-rows"):
        result = audit(table, n_resamples=50, n_permutations=50, missing=missing)
        assert result["metrics"] == ["score.good", "score.weak", "score.hybrid"]
        assert result["n_rows"] == 120 and result["n_dropped_rows"] == 0
        assert "score.pass_rate: no row has a value (e.g. no tests to run, or no reference)" in \
            result["skipped"]
    with pytest.raises(ValueError, match="no metric has a value on any row"):
        audit(table, metrics=["score.pass_rate"], n_resamples=10, n_permutations=10)
    gappy = frame.assign(**{"score.x": [np.nan, 1.0] * 60, "score.y": [1.0, np.nan] * 60})
    with pytest.raises(ValueError, match=r"no row has a value in every column .* missing: "
                                         r"score.x \(60 rows\), score.y \(60 rows\)"):
        audit(gappy, n_resamples=10, n_permutations=10, missing="drop-rows")


def _pass_frame() -> pd.DataFrame:
    """6 tasks x 2 systems with hand-chosen pass/fail and mean ratings; one row has no tests."""
    cells = [  # task, system, pass, rating
        (0, "s1", 1.0, 4.0), (0, "s2", 0.0, 2.5), (1, "s1", 1.0, 3.0), (1, "s2", 0.0, 1.0),
        (2, "s1", 1.0, 1.5), (2, "s2", 0.0, 0.0), (3, "s1", 0.0, 2.0), (3, "s2", 1.0, 3.5),
        (4, "s1", 0.0, 3.0), (4, "s2", np.nan, 1.0), (5, "s1", 1.0, 0.4), (5, "s2", 0.0, 2.4)]
    return pd.DataFrame([{"task_id": f"t{t}", "system": s, "rating": r, "score.pass": p,
                          "score.x": 0.1 * k + (0.5 if s == "s2" else 0.0)}
                         for k, (t, s, p, r) in enumerate(cells)])


def _pass_audit(frame: pd.DataFrame, **options) -> dict:
    return audit(frame, metrics=["score.x"], seed=5, n_resamples=300, n_permutations=20,
                 scale=(0, 4), **options)


def test_a_wide_or_fractional_scale_is_cut_into_bins_of_equal_width():
    """0-100 would make 101 grades, 0-1 two: both get 10 bins of equal width instead, each named
    by its interval (the last one closed); a 0-1 scale of 0/1 labels keeps its two grades."""
    frame = _pass_frame()
    wide = frame.assign(rating=frame["rating"] * 25)  # 100, 62.5, 75, 25, 37.5, 0, 50, ...
    value = audit(wide, metrics=["score.x"], seed=5, n_resamples=50, n_permutations=20,
                  scale=(0, 100))["pass_value"]
    assert value["grading"] == "binned"
    assert value["grades"][:2] == ["[0, 10)", "[10, 20)"] and value["grades"][-1] == "[90, 100]"
    # passing: 100, 75, 37.5, 87.5, 10 -> bins 9, 7, 3, 8, 1
    assert [e["n"] for e in value["pass"]["distribution"]] == [0, 1, 0, 1, 0, 0, 0, 1, 1, 1]
    # failing: 62.5, 25, 0, 50, 75, 60 -> bins 6, 2, 0, 5, 7, 6
    assert [e["n"] for e in value["fail"]["distribution"]] == [1, 0, 1, 0, 0, 1, 2, 1, 0, 0]
    unit = frame.assign(rating=frame["rating"] / 4)
    value = audit(unit, metrics=["score.x"], seed=5, n_resamples=50, n_permutations=20,
                  scale=(0, 1))["pass_value"]
    assert value["grading"] == "binned" and value["grades"][-1] == "[0.9, 1]"
    # a rating on an edge is in the bin it opens (0.3, 0.6, 0.7: a hair above 0.1 * k in binary)
    from hybridmetric.audit import _grades
    assert _grades(np.array([0.3, 0.6, 0.7, 0.29, 1.0, 0.0]), (0, 1))[0].tolist() == [
        3, 6, 7, 2, 9, 0]
    # a scale whose ends are not integers is binned (rounded, 3.5 would be a grade 4 past it)
    grades, names, how = _grades(np.array([0.5, 3.5, 2.0]), (0.5, 3.5))
    assert (grades.tolist(), names[0], names[-1], how) == ([0, 9, 5], "[0.5, 0.8)", "[3.2, 3.5]",
                                                          "binned")
    # edges rounded to digits of the scale, not to 9 decimals (0 to 1e-10: every edge was 0)
    grades, names, _ = _grades(np.array([3e-11, 1e-10]), (0, 1e-10))
    assert (grades.tolist(), names[:2], names[-1]) == ([3, 9], ["[0, 1e-11)", "[1e-11, 2e-11)"],
                                                      "[9e-11, 1e-10]")
    labels = unit.assign(rating=(unit["rating"] >= 0.5).astype(float))
    value = audit(labels, metrics=["score.x"], seed=5, n_resamples=50, n_permutations=20,
                  scale=(0, 1))["pass_value"]
    assert (value["grading"], value["grades"]) == ("rounded", [0, 1])


def test_pass_value_by_hand():
    frame = _pass_frame()
    result = _pass_audit(frame)
    value = result["pass_value"]
    assert value["n_missing"] == 1 and value["grades"] == [0, 1, 2, 3, 4]
    passing, failing = value["pass"], value["fail"]
    assert (passing["n"], passing["n_tasks"], failing["n"], failing["n_tasks"]) == (5, 5, 6, 6)
    assert passing["mean"]["value"] == pytest.approx(12.4 / 5)  # 4, 3, 1.5, 3.5, 0.4
    assert failing["mean"]["value"] == pytest.approx(10.9 / 6)  # 2.5, 1, 0, 2, 3, 2.4
    assert passing["useful_share"]["value"] == pytest.approx(3 / 5)
    assert failing["useful_share"]["value"] == pytest.approx(4 / 6)
    # round half up: 2.5 -> 3, 1.5 -> 2, 3.5 -> 4, 2.4 -> 2, 0.4 -> 0
    assert [e["n"] for e in passing["distribution"]] == [1, 0, 1, 1, 2]
    assert [e["n"] for e in failing["distribution"]] == [1, 1, 2, 2, 0]
    assert [e["grade"] for e in failing["distribution"]] == [0, 1, 2, 3, 4]
    assert failing["distribution"][3]["share"]["value"] == pytest.approx(2 / 6)
    difference = value["difference"]
    assert difference["mean"]["value"] == pytest.approx(12.4 / 5 - 10.9 / 6)
    assert difference["useful_share"]["value"] == pytest.approx(3 / 5 - 4 / 6)
    estimates = [passing["mean"], failing["mean"], passing["useful_share"],
                 failing["useful_share"], difference["mean"], difference["useful_share"]]
    estimates += [e["share"] for e in passing["distribution"] + failing["distribution"]]
    for estimate in estimates:
        lo, hi = estimate["ci"]
        assert lo <= estimate["value"] <= hi
    assert result["settings"]["useful_threshold"] == 2.0 and result["settings"]["scale"] == [0, 4]
    assert "useful:2.0" in result["signature"] and "scale:0,4" in result["signature"]
    stricter = _pass_audit(frame, useful_threshold=3.0)["pass_value"]
    assert stricter["fail"]["useful_share"]["value"] == pytest.approx(1 / 6)
    assert _pass_audit(frame) == result
    json.dumps(result, allow_nan=False)


def test_pass_value_bootstrap_equals_a_direct_resampling_loop():
    frame = _pass_frame()
    result = _pass_audit(frame)
    counts = stats.group_bootstrap_counts(6, 300, 5)  # the audit's task resamples (seed 5)
    task = frame["task_id"].str[1:].astype(int).to_numpy()
    passed, rating = frame["score.pass"].to_numpy(), frame["rating"].to_numpy()
    deltas, fail_useful = [], []
    for weights in counts:
        w = weights[task]
        means = [np.sum(w * rating * (passed == p)) / np.sum(w * (passed == p)) for p in (1, 0)]
        deltas.append(means[0] - means[1])
        fail_useful.append(np.sum(w * (rating >= 2) * (passed == 0)) / np.sum(w * (passed == 0)))
    value = result["pass_value"]
    np.testing.assert_allclose(value["difference"]["mean"]["ci"], stats.percentile_ci(deltas))
    np.testing.assert_allclose(value["fail"]["useful_share"]["ci"],
                               stats.percentile_ci(fail_useful))


def test_by_system_by_hand():
    frame = _pass_frame()
    by_system = _pass_audit(frame)["by_system"]
    assert list(by_system) == ["s1", "s2"]
    assert by_system["s1"]["n"] == 6 and by_system["s1"]["n_tasks"] == 6
    assert by_system["s1"]["mean"]["value"] == pytest.approx(13.9 / 6)
    assert by_system["s2"]["mean"]["value"] == pytest.approx(10.4 / 6)
    assert by_system["s2"]["metrics"]["score.x"] == pytest.approx(0.5 + 0.1 * 36 / 6)
    for values in by_system.values():
        lo, hi = values["mean"]["ci"]
        assert lo <= values["mean"]["value"] <= hi


def test_pass_value_on_the_audited_rows_and_bad_pass_columns():
    frame = _pass_frame()
    dropped = audit(frame, metrics=["score.x", "score.pass"], n_resamples=50, n_permutations=20,
                    missing="drop-rows")
    assert dropped["n_dropped_rows"] == 1 and dropped["pass_value"]["n_missing"] == 0
    assert dropped["pass_value"]["grades"] == [0, 1, 2, 3, 4]  # observed range without a scale
    assert dropped["by_system"]["s2"]["n"] == 5
    plain = _pass_audit(frame.drop(columns=["score.pass", "system"]))
    assert "pass_value" not in plain and "by_system" not in plain
    odd = frame.assign(**{"score.pass": frame["score.pass"].replace(1.0, 0.5)})
    with pytest.raises(ValueError, match=r"1.0 \(pass\), 0.0 \(fail\) or NaN .* row 0 holds 0.5"):
        _pass_audit(odd)
    with pytest.raises(ValueError, match="outside the scale"):
        audit(frame, metrics=["score.x"], n_resamples=50, n_permutations=20, scale=(1, 4))


def test_the_useful_threshold_defaults_to_the_middle_of_the_scale():
    frame = _pass_frame()
    assert _pass_audit(frame)["settings"]["useful_threshold"] == 2.0  # 0-4
    scaled = frame.assign(rating=frame["rating"] * 25)  # the same grades on 0-100
    result = audit(scaled, metrics=["score.x"], seed=5, n_resamples=50, n_permutations=20,
                   scale=(0, 100))
    assert result["settings"]["useful_threshold"] == 50.0
    assert result["pass_value"]["fail"]["useful_share"]["value"] == pytest.approx(4 / 6)
    observed = audit(frame, metrics=["score.x"], seed=5, n_resamples=50, n_permutations=20)
    assert observed["settings"]["useful_threshold"] == pytest.approx((0.0 + 4.0) / 2)


def test_ratings_outside_the_given_scale_are_refused_as_fit_refuses_them(frame):
    """Every rating, not only those that round outside it (fit counts the same)."""
    above = int((frame["rating"] > 2).sum())
    assert above > int((np.floor(frame["rating"] + 0.5) > 2).sum())  # some round to 2
    with pytest.raises(ValueError, match=rf"{above} rating\(s\) of 'rating' lie outside the "
                                         r"scale 0 to 2, e\.g\. .* \(row \d+, task 't"):
        audit(frame, scale=(0, 2), n_resamples=10, n_permutations=10)


def test_tiny_tables_end_in_results_or_a_reason():
    three = pd.DataFrame({"task_id": ["a", "b", "c"], "rating": [0.0, 1.0, 3.0],
                          "score.x": [0.1, 0.5, 0.4], "score.y": [0.3, 0.2, 0.9]})
    result = audit(three, n_resamples=20, n_permutations=20)  # (Williams needs 4 rows)
    assert [row["p_williams"] for row in result["comparisons"]] == [None]
    with pytest.raises(ValueError, match="needs rows of at least 2 tasks .* the table has 1"):
        audit(three.assign(task_id="a"), n_resamples=20, n_permutations=20)


def test_humans_tying_each_task_s_rows_leave_no_within_task_comparison():
    """Within-task tau_darr would be undefined for every metric (no pair of a task's rows
    differs in rating): the level is left out, and with it its comparison, which says so."""
    rng = np.random.default_rng(0)
    rating = np.repeat(rng.integers(0, 5, 8), 3).astype(float)
    frame = pd.DataFrame({"task_id": np.repeat(np.arange(8), 3).astype(str), "rating": rating,
                          "score.a": rating + rng.normal(0, 0.5, 24),
                          "score.b": rng.normal(size=24)})
    result = audit(frame, focus="score.a", n_resamples=50, n_permutations=99)
    assert [r["level"] for r in result["comparisons"]] == ["item"]
    assert "comparisons at within_task level: the level was not computed" in result["skipped"]


def test_a_tie_threshold_counts_human_ties_and_leaves_tau_darr_untested(frame):
    result = audit(frame, n_resamples=20, n_permutations=20, tie_threshold=0.5)
    h, tasks = frame["rating"].to_numpy(), frame["task_id"].to_numpy()
    i, j, _ = stats.within_group_pairs(tasks)
    assert result["counts"]["human_tied_pairs"] == int((np.abs(h[i] - h[j]) <= 0.5).sum())
    darr = [r for r in result["comparisons"] if r["statistic"] == "tau_darr"]
    assert darr and all(r["p_permutation"] is None for r in darr)
    assert any("at tau_darr: it needs exact ties (tie_threshold 0, not 0.5)" in reason
               for reason in result["skipped"])


def test_with_every_metric_constant_the_focus_is_named_or_refused():
    """No metric varies on the rows (so none has a correlation to choose the focus by): the
    audit says to name one, and audits with the one named."""
    frame = _pass_frame().assign(**{"score.x": 0.5, "score.y": 1.0})
    options = {"metrics": ["score.x", "score.y"], "n_resamples": 20, "n_permutations": 20}
    with pytest.raises(ValueError, match=r"one constant on the rows audited has none.*--focus"):
        audit(frame, **options)
    result = audit(frame, focus="score.y", **options)
    assert result["agreement"]["item"]["score.y"]["pearson"]["value"] is None
    assert any("is constant" in reason for reason in result["skipped"]), result["skipped"]


def test_a_constant_rating_is_refused_with_its_reason():
    frame = _pass_frame().assign(rating=3.0)
    with pytest.raises(ValueError, match="'rating' takes one value on every row"):
        audit(frame, metrics=["score.x"], n_resamples=20, n_permutations=20)


def test_where_audits_the_rows_pandas_selects_and_records_them(frame):
    """``where`` gives the numbers of the table cut by hand, and says so: in the results, the
    signature (absent where no rows were chosen), and nowhere else."""
    options = {"seed": 3, "n_resamples": 200, "n_permutations": 200}
    chosen = audit(frame, where=["system=beta", "system=alpha"], **options)
    by_hand = audit(frame[frame["system"].isin(["alpha", "beta"])].reset_index(drop=True),
                    **options)
    for key in ("agreement", "comparisons", "ceiling", "by_system", "counts"):
        assert chosen[key] == by_hand[key]
    assert (chosen["where"], chosen["n_table_rows"], chosen["n_rows"]) == (
        ["system=alpha", "system=beta"], 120, 60)  # (in order: the order selects nothing)
    assert '|where:["system=alpha", "system=beta"]|' in chosen["signature"]
    assert "where" not in by_hand["signature"] and by_hand["where"] == []
    # fields are all met, each by one of its values
    both = audit(frame.assign(half=np.arange(120) % 2), where=["system=beta", "half=1"],
                 **options)
    assert both["n_rows"] == int(((frame["system"] == "beta") & (np.arange(120) % 2 == 1)).sum())
    # a metric constant on the rows chosen (its permutation tests skipped) changes no record
    constant = frame.assign(**{"score.weak": np.where(frame["system"] == "beta", 0.5,
                                                      frame["score.weak"])})
    one = audit(constant, where="system=beta", **options)
    assert any("score.weak is constant" in reason for reason in one["skipped"]), one["skipped"]
    assert one["where"] == ["system=beta"] and '|where:["system=beta"]|' in one["signature"]


def test_a_score_column_as_the_target_is_no_metric_of_itself(frame):
    """``target="score.good"``: the other score columns are audited against it, it is refused
    as a metric or focus, and the raters, who graded 'rating', give it no ceiling."""
    result = audit(frame, target="score.good", n_resamples=20, n_permutations=20)
    assert result["metrics"] == ["score.weak", "score.hybrid"]
    assert result["ceiling"] == {"reason": "the raters' grades ('ratings') grade 'rating', not "
                                           "the target 'score.good'"}
    for options in ({"metrics": ["good", "weak"]}, {"focus": "score.good"}):
        with pytest.raises(ValueError, match="the target 'score.good' is named as a metric"):
            audit(frame, target="score.good", n_resamples=20, n_permutations=20, **options)


def test_a_metric_named_twice_is_refused(frame):
    """``--metrics edit_sim,edit_sim`` would audit the same numbers under another signature
    (and count the metric twice in the multiple-comparison correction): refused, under either
    spelling, as ``fit`` refuses a feature named twice."""
    for twice in (["good", "good"], ["score.good", "good", "weak"]):
        with pytest.raises(ValueError, match="a metric is named twice"):
            audit(frame, metrics=twice, n_resamples=20, n_permutations=20)


def test_a_coarse_metric_is_averaged_within_tasks_over_the_tasks_the_others_are():
    """A 0/1 metric that splits only some tasks: counted 0 on the tasks it scores alike (the
    ratings differ there), its within-task means are over the same tasks as every other
    metric's; with constant_within="skip", over those it splits only (mt-metrics-eval's
    default), which ranked exact match above the hybrid on the shipped study."""
    table = _frame(4)
    table["score.coarse"] = (table["score.good"] > 3.2).astype(float)
    metrics = ["score.hybrid", "score.coarse"]
    zero = audit(table, metrics=metrics, n_resamples=200, n_permutations=200,
                 comparisons=[("within_task", "pearson")])
    skip = audit(table, metrics=metrics, n_resamples=200, n_permutations=200,
                 comparisons=[("within_task", "pearson")], constant_within="skip")
    human, tasks = table["rating"].to_numpy(), table["task_id"].to_numpy()
    coarse = table["score.coarse"].to_numpy()
    per_task = stats.per_group("pearson", human, coarse, tasks)
    split = np.isfinite(per_task)
    rated_apart = stats.varies_per_group(human, tasks)
    assert 0 < split.sum() < rated_apart.sum() == 30
    within = zero["agreement"]["within_task"]
    assert within["score.coarse"]["pearson"]["value"] == pytest.approx(per_task[split].sum() / 30)
    assert within["score.coarse"]["pearson"]["n_tasks"] == within["score.hybrid"]["pearson"][
        "n_tasks"] == 30
    assert skip["agreement"]["within_task"]["score.coarse"]["pearson"]["value"] == (
        pytest.approx(per_task[split].mean()))
    assert skip["agreement"]["within_task"]["score.coarse"]["pearson"]["n_tasks"] == split.sum()
    # the permutation test's statistic counts the same way (on the z-scored metric it swaps)
    for constant_as_zero, result in ((True, zero), (False, skip)):
        batch = stats.batch_statistic("within_task", "pearson", human, tasks, None, 0.0,
                                      constant_as_zero)
        assert batch(stats.zscore(coarse))[0] == pytest.approx(
            result["agreement"]["within_task"]["score.coarse"]["pearson"]["value"])
    assert "|constant:zero|" in zero["signature"] and "|constant:skip|" in skip["signature"]
    assert zero["settings"]["constant_within"] == "zero"
    with pytest.raises(ValueError, match="constant_within must be 'zero' or 'skip'"):
        audit(table, metrics=metrics, constant_within="nan")


def test_few_tasks_swap_whole_and_say_what_limits_the_tests_and_intervals():
    """Three tasks of four rows: the item-level permutations swap whole tasks (8 patterns, so
    no p below 1/8), and the notes say so, and that intervals over so few tasks are rough; a
    system seen in one task leaves most resamples without it."""
    table = _frame(5, n_tasks=3)
    result = audit(table, metrics=["score.hybrid", "score.good"], n_resamples=300,
                   n_permutations=300, comparisons=[("item", "pearson")])
    (row,) = result["comparisons"]
    assert row["p_permutation"] >= 1 / 8 and row["p_williams"] is None
    assert ("item-level permutation tests: with 3 tasks no p-value is below 1/8 (the 8 ways to "
            "swap them): no difference there can be significant at 0.05") in result["notes"]
    assert any(note.startswith("the intervals resample 3 tasks") for note in result["notes"])
    many = _frame(6, n_tasks=25)
    rare = many[(many["system"] != "delta") | (many["task_id"] == "t0")].reset_index(drop=True)
    result = audit(rare, metrics=["score.hybrid", "score.good"], n_resamples=300,
                   n_permutations=300, comparisons=[("item", "pearson")])
    system = result["agreement"]["system"]["score.hybrid"]["pearson"]
    assert system["n_valid"] < 0.9 * 300
    partial = [n for n in result["notes"] if n.startswith("some intervals rest on fewer")]
    assert len(partial) == 1 and "system pearson" in partial[0]
    assert "item pearson" not in partial[0]
    assert not any(note.startswith("the intervals resample") for note in result["notes"])


def test_every_rater_is_listed_those_with_few_shared_rows_without_a_correlation():
    """A rater who graded two rows (and one who graded a row no one else did) counts among
    n_raters and is listed, with the rows shared with another rater and no correlation (under
    3 shared rows), where the table left them out unsaid."""
    table = _frame(7).copy()
    grades = [dict(g) for g in table["ratings"]]
    grades[0]["late"], grades[1]["late"], grades[2] = 2.0, 3.0, {"alone": 1.0}
    table["ratings"] = grades
    table["rating"] = [float(np.mean(list(g.values()))) for g in grades]
    ceiling = audit(table, metrics=["score.good"], n_resamples=50, n_permutations=50)["ceiling"]
    assert ceiling["n_raters"] == len(ceiling["per_rater"]) == 7
    assert ceiling["per_rater"]["late"] == {"n": 2, "pearson": None, "spearman": None}
    assert ceiling["per_rater"]["alone"] == {"n": 0, "pearson": None, "spearman": None}
    assert all(v["pearson"] is not None for k, v in ceiling["per_rater"].items()
               if k not in ("late", "alone"))


def test_the_permutation_floor_counts_only_what_is_tested_and_what_swaps_can_change():
    """The note that no difference can be significant counts the comparisons that get a
    p-value (not one with a constant metric, left out of Holm too), and, within tasks, the
    tasks whose swap can change the statistic (not those of one row)."""
    rng = np.random.default_rng(8)
    systems = np.tile([f"s{k}" for k in range(5)], 12)
    quality = np.tile(np.arange(5.0), 12) + rng.normal(0, 0.3, 60)
    table = pd.DataFrame({"task_id": np.repeat([f"t{k}" for k in range(12)], 5),
                          "system": systems, "candidate": "x",
                          "rating": quality + rng.normal(0, 0.3, 60),
                          "score.a": quality + rng.normal(0, 0.2, 60),
                          "score.b": -quality + rng.normal(0, 0.2, 60), "score.flat": 1.0})
    result = audit(table, metrics=["score.a", "score.b", "score.flat"], focus="score.a",
                   n_resamples=100, n_permutations=1000, comparisons=[("system", "pearson")])
    b = next(r for r in result["comparisons"] if r["b"] == "score.b")
    assert b["p_holm"] == b["p_permutation"] >= 1 / 32  # (one comparison tested: Holm as is,
    assert not any("permutation tests" in note for note in result["notes"])  # and 1/32 < 0.05)
    # 3 tasks of 6 rows and 12 of one: 2^15 patterns, but only 2^3 change a within-task value
    rows = [(f"t{k}", 6) for k in range(3)] + [(f"u{k}", 1) for k in range(12)]
    tasks = np.concatenate([[name] * size for name, size in rows])
    rating = rng.normal(0, 1, tasks.size)
    mixed = pd.DataFrame({"task_id": tasks, "candidate": "x", "rating": rating,
                          "score.a": rating + rng.normal(0, 0.1, tasks.size),
                          "score.b": rng.normal(0, 1, tasks.size)})
    result = audit(mixed, metrics=["score.a", "score.b"], n_resamples=100,
                   n_permutations=10000, comparisons=[("within_task", "tau_darr")])
    assert result["comparisons"][0]["p_permutation"] >= 1 / 8 - 1e-9
    assert ("within-task permutation tests: with 3 tasks no p-value is below 1/8 (the 8 ways to "
            "swap them): no difference there can be significant at 0.05") in result["notes"]
