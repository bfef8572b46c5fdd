"""The main job, end to end on a slice of the embedded CoNaLa x ODEX study."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
from pathlib import Path

import pytest

from hybridmetric import read_generations, read_study, write_generations
from hybridmetric.cli import main
from hybridmetric.cli.audit import settings
from hybridmetric.signature import parse

STUDY = Path(__file__).resolve().parents[1] / "studies" / "conala-odex"
FAST = ["--resamples", "300", "--permutations", "300", "--repeats", "2", "--bootstrap", "20",
        "--folds", "3"]


@pytest.fixture(scope="module")
def small_study(tmp_path_factory) -> Path:
    """The first 16 tasks (80 rows, some without runnable tests) of the embedded study."""
    folder = tmp_path_factory.mktemp("study")
    frame = read_study(STUDY).generations
    tasks = frame["task_id"].drop_duplicates().iloc[:16]
    write_generations(frame[frame["task_id"].isin(tasks)], folder / "generations.jsonl")
    shutil.copy(STUDY / "study.toml", folder / "study.toml")
    return folder


def test_run_writes_scores_card_and_report_deterministically(small_study, tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(small_study), "-o", str(first), *FAST]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "held-out agreement with rating" in printed and "dibia_combined" in printed
    for name in ("scores.jsonl", "scores.jsonl.signature.json", "card.json",
                 "report/report.html", "report/report.md", "report/results.json"):
        assert (first / name).exists(), name
    scores = read_generations(first / "scores.jsonl")
    assert {"score.codebertscore.f1", "score.codebertscore_intent.f1", "score.pass_rate",
            "score.pass", "outcomes.pass_rate"} <= set(scores.columns)
    # Rows whose tests cannot judge keep NaN; the audit leaves them out and says how many.
    no_tests = int(scores["tests"].isna().sum())
    assert no_tests > 0 and scores["score.pass"].isna().sum() == no_tests
    results = json.loads((first / "report" / "results.json").read_text())
    assert results["n_dropped_rows"] == no_tests
    lines = ", ".join(str(k + 1) for k in scores.index[scores["tests"].isna()][:5])
    gone = (f"score.pass_rate ({no_tests}), score.pass ({no_tests}), score.dibia_combined "
            f"({no_tests}), score.hybrid ({no_tests})")  # (no tests: no PASS, nor what uses it)
    assert (f"note: {no_tests} row(s) left out for a missing value in {gone}: "
            f"{small_study / 'generations.jsonl'}, lines {lines}") in captured.err, captured.err
    report = (first / "report" / "report.md").read_text()
    assert (f"| rows left out (a metric or the target missing) | {no_tests} (score.pass\\_rate "
            f"missing: {no_tests}; ") in report
    assert results["focus"] == "score.hybrid"
    assert {"score.hybrid", "score.dibia_combined", "score.pass"} <= set(results["metrics"])
    assert results["pass_value"]["pass"]["n"] + results["pass_value"]["fail"]["n"] == (
        len(scores) - no_tests)
    assert results["card"]["cv"]["dibia_combined"]["pass"] == "score.pass"
    # every score traces to its scorer's signature, and the hybrid's numbers are held out
    sidecar = json.loads((first / "scores.jsonl.signature.json").read_text())
    assert results["scorers"]["dibia_combined"] == (
        "min(1, score.pass + score.edit_sim), computed by run from the scores")
    del results["scorers"]["dibia_combined"]
    assert results["scorers"] == sidecar["scorers"] and "pass_rate" in results["scorers"]
    assert "Scorer pass\\_rate:" in report and sidecar["scorers"]["pass_rate"] in report
    assert results["hybrid_source"].startswith("out-of-fold predictions")

    assert main(["run", str(small_study), "-o", str(second), *FAST]) == 0
    assert (second / "report" / "results.json").read_bytes() == (
        first / "report" / "results.json").read_bytes()


def test_the_audited_rows_are_saved_and_auditing_them_again_gives_the_same_report(
        small_study, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(small_study), "-o", str(out), "--seed", "3", *FAST]) == 0
    audited = read_generations(out / "audited.jsonl")
    scores = read_generations(out / "scores.jsonl")
    # the scores' rows and columns, the baseline (min(1, PASS + EDIT-SIM)) and the held-out hybrid
    assert audited[scores.columns].equals(scores)
    expected = (scores["score.pass"] + scores["score.edit_sim"]).clip(upper=1)
    assert audited["score.dibia_combined"].equals(expected)
    assert audited["score.hybrid"].notna().sum() == scores["score.pass"].notna().sum()
    sidecar = json.loads((out / "audited.jsonl.signature.json").read_text())
    assert sidecar["hybrid"] == json.loads((out / "card.json").read_text())["signature"]
    assert sidecar["audit"]["seed"] == 3 and sidecar["audit"]["missing"] == "drop-rows"
    capsys.readouterr()
    # audit on the file alone (its sidecar's settings: seed, resamples, scale, ...) and the card
    again = tmp_path / "again"
    assert main(["audit", str(out / "audited.jsonl"), "--card", str(out / "card.json"),
                 "-o", str(again)]) == 0
    noted = capsys.readouterr().err
    assert "in-sample" not in noted and "seed=3" in noted and "None" not in noted
    assert (again / "results.json").read_bytes() == (out / "report" / "results.json").read_bytes()
    # the command line wins over the sidecar; a sidecar's setting that is not one is refused
    assert main(["audit", str(out / "audited.jsonl"), "-o", str(tmp_path / "other"),
                 "--seed", "4"]) == 0
    other = json.loads((tmp_path / "other" / "results.json").read_text())
    assert parse(other["signature"])["seed"] == "4"
    assert parse(other["signature"])["boot"] == "300"  # (the sidecar's)
    for name, bad in (("scale", [4, 0]), ("scale", [0, math.inf]), ("resamples", 0),
                      ("useful", math.nan), ("missing", "drop")):
        (out / "audited.jsonl.signature.json").write_text(
            json.dumps({**sidecar, "audit": {**sidecar["audit"], name: bad}}))
        capsys.readouterr()
        assert main(["audit", str(out / "audited.jsonl"), "-o", str(tmp_path / "bad")]) == 2
        assert (f"audited.jsonl.signature.json: the recorded audit setting {name!r} is {bad!r}"
                in capsys.readouterr().err)
    (out / "audited.jsonl.signature.json").write_text(json.dumps({**sidecar, "audit": [1]}))
    assert main(["audit", str(out / "audited.jsonl"), "-o", str(tmp_path / "bad")]) == 2
    assert "'audit' should hold the settings" in capsys.readouterr().err


def test_audit_settings_come_from_the_command_line_then_the_record_then_the_defaults():
    def given(**values):
        names = ("target", "scale", "useful", "missing", "seed", "resamples", "permutations",
                 "tie_threshold", "constant_within")
        return argparse.Namespace(**{name: values.get(name) for name in names})

    # a plain scores file (no record): the defaults of before
    assert settings(given(), None, "x") == {
        "target": "rating", "scale": None, "useful": None, "missing": "refuse", "seed": 0,
        "resamples": 10000, "permutations": 10000, "tie_threshold": 0.0,
        "constant_within": "zero"}
    recorded = {"target": "rating", "scale": [0, 4], "useful": 2, "missing": "drop-rows",
                "seed": 3, "resamples": 300, "permutations": 200, "tie_threshold": 0.25,
                "constant_within": "skip"}
    assert settings(given(), recorded, "x") == {**recorded, "scale": (0, 4)}
    assert settings(given(constant_within="zero"), recorded, "x")["constant_within"] == "zero"
    # a record written before the options existed: their defaults
    older = {k: v for k, v in recorded.items() if k not in ("tie_threshold", "constant_within")}
    assert settings(given(), older, "x")["tie_threshold"] == 0.0
    for name, value in (("tie_threshold", -1), ("tie_threshold", "0.1"),
                        ("constant_within", "none")):
        with pytest.raises(ValueError, match=f"recorded audit setting '{name}' is .*; give "
                                             f"--{name.replace('_', '-')} instead"):
            settings(given(), {**recorded, name: value}, "x")
    assert settings(given(seed=5, scale="1,5"), recorded, "x")["seed"] == 5
    assert settings(given(scale="1,5"), recorded, "x")["scale"] == (1.0, 5.0)
    # another target: the record's scale and useful rating were its own target's
    other = settings(given(target="useful01"), recorded, "x")
    assert (other["target"], other["scale"], other["useful"]) == ("useful01", None, None)
    assert other["seed"] == 3


def test_a_study_outside_its_scale_or_without_its_target_is_refused_before_scoring(
        small_study, tmp_path, capsys):
    frame = read_study(small_study).generations
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(small_study / "study.toml", broken / "study.toml")
    frame.loc[3, "rating"] = 9.0  # the study says 0-4
    write_generations(frame, broken / "generations.jsonl")
    out = tmp_path / "out"
    assert main(["run", str(broken), "-o", str(out), *FAST]) == 2
    error = capsys.readouterr().err
    assert "1 value(s) of 'rating' lie outside the study's scale 0 to 4" in error
    assert f"generations.jsonl, line 4 (task {frame.loc[3, 'task_id']!r}): 9.0" in error
    assert not out.exists()  # nothing was scored
    write_generations(frame.drop(columns=["rating", "ratings"]), broken / "generations.jsonl")
    assert main(["run", str(broken), "-o", str(out), *FAST]) == 2
    assert "the study has no 'rating' column" in capsys.readouterr().err
    # each rater's grade is checked too, whatever the model; and integer for ordinal
    frame.loc[3, "rating"] = 2.0
    rater, task = sorted(frame.loc[5, "ratings"])[0], frame.loc[5, "task_id"]
    for model, grade, expected in (
            ("nonneg", 4.0000001, f"generations.jsonl, line 6, field 'ratings': rater {rater!r} "
                                  f"gave 4.0000001, outside the scale 0 to 4 (task {task!r})"),
            ("mixed", 4.5, f"generations.jsonl, line 6, field 'ratings': rater {rater!r} gave "
                           f"4.5, outside the scale 0 to 4 (task {task!r})"),
            ("ordinal", 2.9999999999999996, f"line 6 (task {task!r}), rater {rater!r} is "
                                            "2.9999999999999996: --model ordinal needs integer "
                                            "grades")):
        frame.at[5, "ratings"] = {**frame.loc[5, "ratings"], rater: grade}
        write_generations(frame, broken / "generations.jsonl")
        assert main(["run", str(broken), "-o", str(out), *FAST, "--model", model]) == 2
        error = capsys.readouterr().err
        assert expected in error, error
    frame["ratings"] = None
    write_generations(frame, broken / "generations.jsonl")
    assert main(["run", str(broken), "-o", str(out), *FAST, "--model", "mixed"]) == 2
    assert "from a 'ratings' column ({rater: grade} per row), which no row of the study has" in (
        capsys.readouterr().err)
    assert not out.exists()
    # too few tasks for the folds, or rows without a system where others have one
    frame = read_study(small_study).generations
    write_generations(frame, broken / "generations.jsonl")
    folds = FAST.index("--folds")
    more_folds = [*FAST[:folds], "--folds", "40", *FAST[folds + 2:]]
    assert main(["run", str(broken), "-o", str(out), *more_folds]) == 2
    assert "16 distinct tasks cannot fill 40 folds; use fewer folds (--folds)" in (
        capsys.readouterr().err)
    frame.loc[[2, 7], "system"] = None
    write_generations(frame, broken / "generations.jsonl")
    assert main(["run", str(broken), "-o", str(out), *FAST]) == 2
    assert "'system' is missing in 2 of" in capsys.readouterr().err
    assert not out.exists()
    # every metric takes one value: no hybrid to fit, said once
    frame = read_study(small_study).generations
    write_generations(frame.assign(candidate=frame["references"].str[0]),
                      broken / "generations.jsonl")
    assert main(["run", str(broken), "-o", str(out), *FAST, "--scorers", "edit_sim,exact_match",
                 "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert ("score.edit_sim, score.exact_match take one value on the rows the hybrid is fitted "
            "on") in error
    assert "error: no metric varies on the rows the hybrid is fitted on" in error
    assert "fitting the hybrid on" not in error


def test_a_metric_constant_on_the_rated_rows_alone_is_left_out_of_the_hybrid(
        small_study, tmp_path, capsys):
    """The one exact match is the row without a rating, which the fit drops: exact_match varies
    on the study but not on the rows fitted, so run leaves it out of the hybrid, as it does a
    metric constant on the whole study, instead of failing in the fit."""
    frame = read_study(small_study).generations
    frame["candidate"] = frame["candidate"] + "\n# edited"
    assert not (frame["candidate"] == frame["references"].str[0]).any()
    frame.at[3, "candidate"] = frame.at[3, "references"][0]
    frame.at[3, "rating"] = None
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(small_study / "study.toml", folder / "study.toml")
    write_generations(frame, folder / "generations.jsonl")
    out = tmp_path / "out"
    assert main(["run", str(folder), "-o", str(out), *FAST, "--no-progress",
                 "--scorers", "edit_sim,exact_match,chrf"]) == 0
    error = capsys.readouterr().err
    assert ("score.exact_match takes one value on the rows the hybrid is fitted on; it cannot "
            "weigh in it and is left out of it") in error
    card = json.loads((out / "card.json").read_text())
    assert [f["name"] for f in card["features"]] == ["score.edit_sim", "score.chrf"]


@pytest.mark.parametrize("model", ["nonneg", "mixed"])
def test_a_study_of_raters_grades_alone_is_fitted_and_audited_on_their_mean(
        small_study, tmp_path, capsys, model):
    """No ``rating`` column, only each rater's grade: the target is each row's mean grade, and
    everything comes out as for the same study with that mean written in as its rating."""
    frame = read_study(small_study).generations
    cheap = ["--scorers", "edit_sim,chrf", "--model", model, *FAST]
    outputs = {}
    for name, table in (("raters", frame.drop(columns=["rating"])),
                        ("mean", frame.assign(rating=[statistics.mean(r.values())
                                                      for r in frame["ratings"]]))):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(small_study / "study.toml", folder / "study.toml")
        write_generations(table, folder / "generations.jsonl")
        assert main(["run", str(folder), "-o", str(tmp_path / f"out-{name}"), *cheap]) == 0
        outputs[name] = json.loads((tmp_path / f"out-{name}" / "card.json").read_text())
        error = capsys.readouterr().err
        assert ("the target is each row's mean grade" in error) == (name == "raters")
    raters, mean = outputs["raters"], outputs["mean"]
    for key in ("weights", "intercept", "cv"):
        assert raters[key] is not None and raters[key] == mean[key], key



def test_renamed_scorers_are_the_hybrid_s_features_and_run_s_options_reach_the_audit(
        small_study, tmp_path, capsys):
    """The hybrid's default features follow the scorers selected, under their own names; a
    feature no scorer writes is refused before any scoring; --missing reaches the audit too."""
    out = tmp_path / "renamed"
    assert main(["run", str(small_study), "-o", str(out), "--scorers", "es=edit_sim,chrf",
                 "--missing", "refuse", *FAST]) == 0
    card = json.loads((out / "card.json").read_text())
    assert [f["name"] for f in card["features"]] == ["score.es", "score.chrf"]
    results = json.loads((out / "report" / "results.json").read_text())
    assert "|missing:refuse|" in results["signature"]
    capsys.readouterr()
    refused = tmp_path / "refused"
    assert main(["run", str(small_study), "-o", str(refused), "--scorers", "es=edit_sim,chrf",
                 "--features", "es,edit_sim", *FAST]) == 2
    assert "--features edit_sim: no selected scorer writes" in capsys.readouterr().err
    assert not refused.exists()
