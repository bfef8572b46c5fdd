"""score -> fit -> score --card -> audit through the command line, on a slice of CoNaLa."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridmetric import read_generations, read_study, write_generations
from hybridmetric.cli import main
from hybridmetric.combine import MetricCard

CONALA = Path(__file__).resolve().parents[1] / "studies" / "conala"
SCORERS = ["--scorers", "edit_sim,chrf,rouge_l", "--no-progress"]


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory) -> Path:
    frame = read_study(CONALA).generations
    path = tmp_path_factory.mktemp("data") / "g.jsonl"
    write_generations(frame.iloc[:200], path)
    return path


def test_fit_then_apply_card_then_audit(slice_file, tmp_path, capsys):
    scores, card = tmp_path / "s.jsonl", tmp_path / "card.json"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    assert main(["fit", str(scores), "-o", str(card), "--scale", "0,4", "--repeats", "2",
                 "--bootstrap", "20"]) == 0
    said = capsys.readouterr()
    assert "held-out agreement with rating" in said.out
    assert ("note: --bootstrap 20 gives the weights' 95% CIs from 20 resamples; their tails "
            "need at least 40") in said.err
    # the card never goes over the scores it is fitted on, nor their sidecar (by any name)
    before = scores.read_bytes()
    for path in (f"{tmp_path}/./s.jsonl", f"{scores}.signature.json"):
        assert main(["fit", str(scores), "-o", path, "--repeats", "1", "--bootstrap", "0"]) == 2
        assert f"-o {path} would overwrite" in capsys.readouterr().err
    assert scores.read_bytes() == before
    # Applying the card scores with the card's scorers and adds score.hybrid.
    applied = tmp_path / "applied.csv"
    assert main(["score", str(slice_file), "-o", str(applied), "--card", str(card),
                 "--no-progress"]) == 0
    table = read_generations(applied)
    assert table["score.hybrid"].between(0, 4).all()
    sidecar = json.loads(Path(f"{applied}.signature.json").read_text())
    assert sidecar["hybrid"] == json.loads(card.read_text())["signature"]
    # a table scored already: the error says how to apply the card to it (audit --card)
    capsys.readouterr()
    assert main(["score", str(scores), "-o", str(tmp_path / "again.jsonl"), "--card", str(card),
                 "--no-progress"]) == 2
    assert ("it holds the card's features, scored with the card's settings: hybridmetric audit "
            "INPUT --card CARD -o REPORT_DIR applies") in capsys.readouterr().err
    # ... where it does not (a feature missing), the error alone
    only = tmp_path / "only.jsonl"
    assert main(["score", str(slice_file), "-o", str(only), "--scorers", "chrf",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["score", str(only), "-o", str(tmp_path / "again2.jsonl"), "--card", str(card),
                 "--no-progress"]) == 2
    said = capsys.readouterr().err
    assert "already has score column(s)" in said and "audit" not in said
    # rows the scorers cannot score (no reference) get NaN, and a note says why
    partial = read_generations(slice_file)
    partial.loc[[0, 1, 2], "references"] = None
    write_generations(partial, tmp_path / "partial.jsonl")
    capsys.readouterr()
    assert main(["score", str(tmp_path / "partial.jsonl"), "-o", str(tmp_path / "p.jsonl"),
                 "--card", str(card), "--no-progress"]) == 0
    assert ("note: 3 of 200 rows lack a feature of the card, missing or infinite "
            "(score.edit_sim: 3 rows") in capsys.readouterr().err
    assert read_generations(tmp_path / "p.jsonl")["score.hybrid"].isna().sum() == 3
    # the audit leaves them out when asked, and says which they are
    assert main(["audit", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "pr"), "--missing",
                 "drop-rows", "--resamples", "20", "--permutations", "20"]) == 0
    said = capsys.readouterr().err
    assert "note: 3 row(s) left out for a missing value in score." in said
    assert f"score.hybrid (3): {tmp_path / 'p.jsonl'}, lines 1, 2, 3" in said
    # too few draws for a 95% interval's tails, or for a small p-value, are noted
    assert ("note: --resamples 20 gives the 95% CIs from 20 resamples; their tails need at "
            "least 40") in said
    assert "note: --permutations 20 gives p-values of at least 1/21 = 0.0476" in said
    # a study of another scale: the card's hybrid stays on its own, and a note says so
    for name, scale, noted in (("same", "min = 0\nmax = 4", False),
                               ("other", "min = 1\nmax = 7", True)):
        folder = tmp_path / name
        folder.mkdir()
        write_generations(read_generations(slice_file), folder / "generations.jsonl")
        (folder / "study.toml").write_text(f"[rating]\n{scale}\n")
        assert main(["score", str(folder), "-o", str(tmp_path / f"{name}.jsonl"), "--card",
                     str(card), "--no-progress"]) == 0
        err = capsys.readouterr().err
        assert ("note: the card was fitted on ratings of 0 to 4 (given); this study's scale is "
                "1 to 7: score.hybrid stays on the card's scale" in err) == noted, err
    report = tmp_path / "report"
    assert main(["audit", str(applied), "-o", str(report), "--resamples", "200",
                 "--permutations", "200", "--scale", "0,4"]) == 0
    results = json.loads((report / "results.json").read_text())
    assert results["focus"] == "score.hybrid" and results["n_rows"] == 200
    assert results["scorers"] == sidecar["scorers"]
    # score --card wrote it: the report says so, with the card's signature
    assert results["hybrid_source"].startswith("a metric card applied by 'hybridmetric score")
    assert results["hybrid_source"].endswith(sidecar["hybrid"])
    assert main(["audit", str(scores), "-o", str(tmp_path / "r2"), "--card", str(card),
                 "--resamples", "20", "--permutations", "20", "--scale", "0,4"]) == 0
    assert "the audit's scale is" not in capsys.readouterr().err
    applied_here = json.loads((tmp_path / "r2" / "results.json").read_text())
    # ... and audited on another scale, the card's hybrid stays on its own, as a note says
    assert main(["audit", str(scores), "-o", str(tmp_path / "r2b"), "--card", str(card),
                 "--resamples", "20", "--permutations", "20", "--scale", "0,5"]) == 0
    assert ("note: the card was fitted on ratings of 0 to 4 (given); the audit's scale is 0 to 5: "
            "score.hybrid stays on the card's scale") in capsys.readouterr().err
    assert applied_here["hybrid_source"].startswith(f"the card {card} applied to these rows")
    assert applied_here["scorers"] == json.loads(Path(f"{scores}.signature.json").read_text())[
        "scorers"]
    # the card that made a table's score.hybrid may come with it; another is refused (the report
    # would show its model and weights beside the first one's predictions), and a score.hybrid
    # that no card's signature is recorded for is refused whatever the command line
    assert main(["audit", str(applied), "-o", str(tmp_path / "r3"), "--card", str(card),
                 "--resamples", "20", "--permutations", "20", "--scale", "0,4"]) == 0
    other = tmp_path / "other.json"
    assert main(["fit", str(scores), "-o", str(other), "--repeats", "1", "--bootstrap", "0",
                 "--seed", "1"]) == 0
    capsys.readouterr()
    assert main(["audit", str(applied), "-o", str(tmp_path / "r4"), "--card", str(other)]) == 2
    said = capsys.readouterr().err
    assert f"{applied} already holds score.hybrid, made by the card whose signature" in said
    assert f"not by the card {other}" in said
    bare = tmp_path / "bare.csv"
    bare.write_bytes(applied.read_bytes())
    Path(f"{bare}.signature.json").write_text(json.dumps(
        {k: v for k, v in sidecar.items() if k != "hybrid"}))
    # (with the card or without it: a score.hybrid no card is recorded for is no hybrid)
    for card_given in ([], ["--card", str(card)]):
        assert main(["audit", str(bare), "-o", str(tmp_path / "r5"), *card_given]) == 2
        assert (f"{bare}.signature.json: it names no metric card for score.hybrid, which only a "
                "card writes") in capsys.readouterr().err
    assert not (tmp_path / "r4").exists() and not (tmp_path / "r5").exists()


def test_a_card_s_scorers_come_back_with_their_names_and_settings(slice_file, tmp_path):
    """score --card without --scorers runs the scorers the card was fitted on: under their
    aliases, with the settings the card records (here not the defaults)."""
    scores, card = tmp_path / "s.jsonl", tmp_path / "card.json"
    assert main(["score", str(slice_file), "-o", str(scores), "--scorers",
                 "es=edit_sim,chrf", "--set", "chrf.word_order=2", "--set", "es.level=token",
                 "--no-progress"]) == 0
    assert main(["fit", str(scores), "-o", str(card), "--repeats", "1", "--bootstrap", "0"]) == 0
    applied = tmp_path / "applied.jsonl"
    assert main(["score", str(slice_file), "-o", str(applied), "--card", str(card),
                 "--no-progress"]) == 0
    table, first = read_generations(applied), read_generations(scores)
    for column in ("score.es", "score.chrf"):
        assert table[column].tolist() == first[column].tolist()
    assert table["score.hybrid"].notna().all()


def test_a_card_with_codebertscore_applies(slice_file, tmp_path, capsys):
    """A card records a setting left unset as ``none`` (codebertscore.baseline, as `run`'s
    default card has it): applying the card reads it back as unset, as ``--set`` does."""
    rows = tmp_path / "g.jsonl"
    write_generations(read_generations(slice_file).iloc[:40], rows)
    scores, card = tmp_path / "s.jsonl", tmp_path / "card.json"
    assert main(["score", str(rows), "-o", str(scores), "--scorers", "codebertscore,edit_sim",
                 "--set", "codebertscore.baseline=none", "--no-progress"]) == 0
    assert "baseline:none" in Path(f"{scores}.signature.json").read_text()
    assert main(["fit", str(scores), "-o", str(card), "--features",
                 "codebertscore.f1,edit_sim", "--repeats", "1", "--bootstrap", "0"]) == 0
    applied = tmp_path / "applied.jsonl"
    assert main(["score", str(rows), "-o", str(applied), "--card", str(card),
                 "--no-progress"]) == 0
    table, first = read_generations(applied), read_generations(scores)
    assert table["score.codebertscore.f1"].tolist() == first["score.codebertscore.f1"].tolist()
    assert table["score.hybrid"].notna().all()
    capsys.readouterr()
    assert main(["score", str(rows), "-o", str(tmp_path / "x.jsonl"), "--scorers",
                 "codebertscore", "--set", "codebertscore.baseline=missing.csv"]) == 2
    assert "codebertscore.baseline='missing.csv': no such file" in capsys.readouterr().err


def test_a_sidecar_that_is_another_table_s_is_refused(slice_file, tmp_path, capsys):
    """audit, fit and passk check that the sidecar signs this table: its row count, and a
    scorer for every score column."""
    scores, other = tmp_path / "s.jsonl", tmp_path / "o.jsonl"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    table = read_generations(scores)
    write_generations(table.iloc[:100], other)
    Path(f"{other}.signature.json").write_text(Path(f"{scores}.signature.json").read_text())
    capsys.readouterr()
    for command in (["audit", str(other), "-o", str(tmp_path / "r")],
                    ["fit", str(other), "-o", str(tmp_path / "c.json")]):
        assert main(command) == 2
        assert "it signs 200 rows, but" in capsys.readouterr().err
    write_generations(table.assign(**{"score.mine": 0.5}), other)
    assert main(["audit", str(other), "-o", str(tmp_path / "r")]) == 2
    assert "no scorer signature for ['score.mine']" in capsys.readouterr().err


def test_a_scores_file_scored_again_keeps_its_signatures(slice_file, tmp_path):
    """Scoring a scores file with more scorers hands its scorers' signatures on: the result is
    fitted and audited like a table scored at once."""
    first, second = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    assert main(["score", str(slice_file), "-o", str(first), "--scorers", "exact_match",
                 "--no-progress"]) == 0
    assert main(["score", str(first), "-o", str(second), "--scorers", "edit_sim",
                 "--no-progress"]) == 0
    signed = json.loads(Path(f"{second}.signature.json").read_text())["scorers"]
    assert set(signed) == {"exact_match", "edit_sim"}
    assert signed["exact_match"] == json.loads(Path(f"{first}.signature.json").read_text())[
        "scorers"]["exact_match"]
    assert main(["fit", str(second), "-o", str(tmp_path / "c.json"), "--repeats", "1",
                 "--bootstrap", "0"]) == 0


def test_command_line_mistakes_are_named(slice_file, tmp_path, capsys):
    scores = tmp_path / "s.jsonl"
    assert main(["score", str(slice_file), "-o", str(scores), "--scorers", "exact_match",
                 "--no-progress"]) == 0
    capsys.readouterr()
    for command, said in (
            (["passk", str(tmp_path / "absent.jsonl")], "absent.jsonl: no such scores file"),
            (["passk", str(scores), "-o", str(tmp_path)], "is a folder; give a file name"),
            # a folder where a file goes, or the other way round, before any work
            (["fit", str(scores), "-o", str(tmp_path)], f"-o {tmp_path} is a folder; give a "
                                                        f"file name, e.g. {tmp_path}/card.json"),
            (["audit", str(scores), "-o", str(scores)], f"-o {scores} is a file; give a "
                                                        "folder"),
            (["run", str(tmp_path / "absent"), "-o", str(scores / "out")],
             f"-o {scores}/out: {scores} is a file, not a folder"),
            (["score", str(slice_file), "-o", str(tmp_path), "--scorers", "exact_match"],
             f"-o {tmp_path} is a folder; give a file name, e.g. {tmp_path}/scores.jsonl"),
            (["score", str(slice_file), "-o", str(scores / "again.jsonl"), "--scorers",
              "exact_match"], f"-o {scores}/again.jsonl: {scores} is a file, not a folder"),
            (["passk", str(scores)], "has no column 'score.pass'; score the table with "
                                     "pass_rate first"),
            (["score", str(slice_file), "-o", str(tmp_path / "x.jsonl"), "--scorers",
              "edit_sim", "--set", "edit_sim.level=token", "--set", "edit_sim.level=char"],
             "edit_sim.level is given twice (--set edit_sim.level=token; --set "
             "edit_sim.level=char); give it once"),
            (["score", str(slice_file), "-o", str(tmp_path / "x.jsonl"), "--scorers",
              "codebertscore", "--device", "cpu", "--set", "codebertscore.device=cuda"],
             "codebertscore.device is given twice (--device cpu; --set "
             "codebertscore.device=cuda)")):
        assert main(command) == 2, command
        assert said in capsys.readouterr().err, command
    with pytest.raises(SystemExit):
        main(["fit", str(scores), "-o", str(tmp_path / "c.json"), "--seed", "-5"])
    assert "argument --seed: a seed is a whole number of 0 or more" in capsys.readouterr().err
    # a single-valued option given twice (argparse would keep the last without a word)
    for command, said in (
            (["score", str(slice_file), "-o", str(tmp_path / "a.jsonl"), "--output",
              str(tmp_path / "b.jsonl")], "-o/--output is given twice; give it once"),
            (["audit", str(scores), "-o", str(tmp_path / "r"), "--seed", "1", "--see=2"],
             "--seed is given twice; give it once"),
            (["audit", str(scores), "-o", str(tmp_path / "r"), "--tie-threshold", "-1"],
             "a tie threshold is a number of 0 or more, got '-1'")):
        with pytest.raises(SystemExit) as stop:
            main(command)
        assert stop.value.code == 2, command
        assert said in capsys.readouterr().err, command
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "b.jsonl").exists()


def test_a_card_that_does_not_match_is_refused_before_scoring(slice_file, tmp_path, capsys):
    scores, card = tmp_path / "s.jsonl", tmp_path / "card.json"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    assert main(["fit", str(scores), "-o", str(card), "--repeats", "1", "--bootstrap", "0"]) == 0
    capsys.readouterr()
    out = tmp_path / "x.jsonl"
    code = main(["score", str(slice_file), "-o", str(out), "--card", str(card),
                 "--set", "chrf.word_order=2", "--no-progress"])
    assert code == 2 and "chrf: differs in word_order" in capsys.readouterr().err
    assert list(tmp_path.glob("x.jsonl*")) == []  # nothing scored, no journal to resume


def test_card_with_other_scorer_settings_is_refused(slice_file, tmp_path, capsys):
    scores, card = tmp_path / "s.jsonl", tmp_path / "card.json"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    assert main(["fit", str(scores), "-o", str(card), "--repeats", "1", "--bootstrap", "0"]) == 0
    capsys.readouterr()
    code = main(["score", str(slice_file), "-o", str(tmp_path / "x.jsonl"), "--card", str(card),
                 *SCORERS, "--set", "rouge_l.tokenizer=code"])
    assert code == 2
    assert "rouge_l" in capsys.readouterr().err


def test_ridge_penalty_is_an_option_of_fit(slice_file, tmp_path, capsys):
    scores = tmp_path / "s.jsonl"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    weights = {}
    for alpha in ("0", "1000"):
        card = tmp_path / f"card{alpha}.json"
        assert main(["fit", str(scores), "-o", str(card), "--model", "ridge", "--alpha", alpha,
                     "--scale", "0,4", "--repeats", "1", "--bootstrap", "0"]) == 0
        saved = json.loads(card.read_text())
        assert saved["alpha"] == float(alpha) and f"alpha:{float(alpha)}" in saved["signature"]
        weights[alpha] = sum(abs(w["value"]) for w in saved["weights"].values())
    # a large penalty shrinks the standardised weights towards 0 (by about n / (n + alpha))
    assert weights["1000"] < 0.5 * weights["0"]
    capsys.readouterr()
    assert main(["fit", str(scores), "-o", str(tmp_path / "c.json"), "--alpha", "2"]) == 2
    assert "--alpha is ridge's penalty; --model nonneg has none" in capsys.readouterr().err
    # nor does a card of another model's signature name one
    assert main(["fit", str(scores), "-o", str(tmp_path / "c.json"), "--repeats", "1",
                 "--bootstrap", "0"]) == 0
    nonneg = json.loads((tmp_path / "c.json").read_text())
    assert "|alpha:" not in nonneg["signature"] and nonneg["alpha"] is None  # (nor the card)
    assert MetricCard.load(tmp_path / "c.json").estimator().model == "nonneg"
    assert main(["fit", str(scores), "-o", str(tmp_path / "c.json"), "--model", "ridge",
                 "--alpha", "inf"]) == 2
    assert "alpha must be a finite number >= 0, got inf" in capsys.readouterr().err



def test_a_scale_is_finite_increasing_and_may_be_negative(slice_file, tmp_path, capsys):
    from hybridmetric.cli import _joined, parser
    assert parser().parse_args(_joined(["audit", "s.jsonl", "-o", "r", "--scale", "-2,2",
                                        "--useful", "-1"])).scale == "-2,2"
    scores = tmp_path / "s.jsonl"
    assert main(["score", str(slice_file), "-o", str(scores), *SCORERS]) == 0
    for scale in ("1,inf", "4,0", "2,2", "-inf,5", "-.5,nan"):
        capsys.readouterr()
        assert main(["fit", str(scores), "-o", str(tmp_path / "c.json"), "--scale", scale]) == 2
        assert "--scale expects MIN,MAX with finite MIN < MAX" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("flags", [["--no-progress"], []])
def test_no_progress_bar_where_none_is_asked_for_nor_off_a_terminal(slice_file, tmp_path, flags):
    """transformers draws its own bar as it loads a model ("Loading weights"): hidden with
    --no-progress, and off a terminal, as scoring's own bar is (a fresh process: the libraries
    keep the setting for the rest of one)."""
    import subprocess
    import sys

    small, out = tmp_path / "g.jsonl", tmp_path / "s.jsonl"
    write_generations(read_generations(slice_file).iloc[:3], small)
    done = subprocess.run(
        [sys.executable, "-m", "hybridmetric.cli", "score", str(small), "-o", str(out),
         "--scorers", "codebertscore", *flags],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "%|" not in done.stderr, done.stderr


def test_audit_where_audits_part_of_a_scores_file(slice_file, tmp_path, capsys):
    """--where audits some rows of a scores file, against its own sidecar, with no scoring
    again: the results and the report say which, and a dropped row keeps its line."""
    generations, scores = tmp_path / "g.jsonl", tmp_path / "s.jsonl"
    table = read_generations(slice_file)
    table.loc[table.index[table["system"] == "codex"][1], "references"] = None  # (no scores)
    write_generations(table, generations)
    assert main(["score", str(generations), "-o", str(scores), "--scorers", "edit_sim,chrf",
                 "--no-progress"]) == 0
    capsys.readouterr()
    options = ["--resamples", "20", "--permutations", "20", "--missing", "drop-rows"]
    assert main(["audit", str(scores), "-o", str(tmp_path / "r"), "--where", "system=codex",
                 "--where", "system=baseline", *options]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert (results["where"], results["n_table_rows"], results["n_rows"],
            results["n_dropped_rows"]) == (["system=baseline", "system=codex"], 200, 79, 1)
    assert set(results["by_system"]) == {"baseline", "codex"}
    line = int(table.index[table["system"] == "codex"][1]) + 1
    assert f"(1): {scores}, line {line}" in capsys.readouterr().err
    report = (tmp_path / "r" / "report.md").read_text()
    assert "those where system is 'baseline' or 'codex', of the table's 200" in report
    assert main(["audit", str(scores), "-o", str(tmp_path / "r2"), "--where", "model=codex",
                 *options]) == 2
    assert "the table has no field 'model'" in capsys.readouterr().err
    # fit too: the card of those rows, which says which they are
    card = tmp_path / "card.json"
    assert main(["fit", str(scores), "-o", str(card), "--where", "system=codex", "--missing",
                 "drop-rows", "--repeats", "2", "--bootstrap", "10", "--no-progress"]) == 0
    assert "the rows where system is 'codex', of the table's 200" in capsys.readouterr().out
    training = json.loads(card.read_text())["training"]
    assert (training["where"], training["n_rows"], training["n_dropped_rows"]) == (
        ["system=codex"], 39, 1)


def test_the_repeated_rows_note_names_only_the_rows_chosen(slice_file, tmp_path, capsys):
    """fit and audit name the rows that repeat an earlier one among those --where chose: a
    repeat among the others counts in no statistic of theirs."""
    table = read_generations(slice_file)
    codex, other = (table.index[table["system"] == name] for name in ("codex", "tranx-annot"))
    for rows in (codex, other):  # the second row of each system repeats its first
        table.loc[rows[1], ["task_id", "candidate"]] = table.loc[rows[0], ["task_id", "candidate"]]
    generations, scores = tmp_path / "g.jsonl", tmp_path / "s.jsonl"
    write_generations(table, generations)
    assert main(["score", str(generations), "-o", str(scores), "--scorers", "edit_sim,chrf",
                 "--no-progress"]) == 0
    fit = ["fit", str(scores), "-o", str(tmp_path / "c.json"), "--repeats", "1", "--bootstrap",
           "0", "--no-progress"]
    audit = ["audit", str(scores), "-o", str(tmp_path / "r"), "--resamples", "20",
             "--permutations", "20"]
    for command in (fit, audit):
        for system, rows in (("codex", codex), ("tranx-annot", other)):
            capsys.readouterr()
            assert main([*command, "--where", f"system={system}"]) == 0
            notes = [line for line in capsys.readouterr().err.splitlines()
                     if "repeat an earlier row" in line]
            assert len(notes) == 1 and f"{scores}, line {rows[1] + 1})" in notes[0], notes
        capsys.readouterr()
        assert main([*command, "--where", "system=baseline"]) == 0
        assert "repeat an earlier row" not in capsys.readouterr().err


def test_files_that_cannot_be_read_or_written_are_errors_not_tracebacks(slice_file, tmp_path,
                                                                         capsys):
    """A card that is not there, or an output where no file can be made (/proc): an error that
    names what the user gave (status 2), not a traceback."""
    assert main(["score", str(slice_file), "-o", str(tmp_path / "s.jsonl"), "--card",
                 str(tmp_path / "none.json")]) == 2
    assert "error: cannot read the metric card" in capsys.readouterr().err
    assert main(["score", str(slice_file), "-o", "/proc/hybridmetric-scores.jsonl",
                 *SCORERS]) == 2
    assert "error: cannot write the output /proc/hybridmetric-scores.jsonl" in \
        capsys.readouterr().err
    # a name that would reorder the line it is printed on shows as its code
    assert main(["score", str(tmp_path / "a\u202eb.jsonl"), "-o", str(tmp_path / "s.jsonl"),
                 *SCORERS]) == 2
    error = capsys.readouterr().err
    assert "a\\u202eb.jsonl: no such file" in error and "\u202e" not in error
    # ... and so in a note (the line that says where the scores went)
    assert main(["score", str(slice_file), "-o", str(tmp_path / "s\u202e.jsonl"), *SCORERS]) == 0
    said = capsys.readouterr().err
    assert "s\\u202e.jsonl" in said and "\u202e" not in said


def test_audit_s_tie_threshold_and_constant_within_reach_the_numbers_and_the_record(
        slice_file, tmp_path, capsys):
    """--tie-threshold and --constant-within are the audit's (run's too): the results, the
    signature and the report's within-task note follow them, and audit takes them up from
    the audited table's sidecar as run recorded them."""
    from hybridmetric.audit import audit
    from hybridmetric.scoring import read_scored

    scores = tmp_path / "s.jsonl"
    assert main(["score", str(slice_file), "-o", str(scores), "--scorers",
                 "edit_sim,exact_match", "--no-progress"]) == 0
    draws = ["--resamples", "20", "--permutations", "20"]
    assert main(["audit", str(scores), "-o", str(tmp_path / "r"), *draws, "--tie-threshold",
                 "0.05", "--constant-within", "skip"]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    frame, _ = read_scored(scores)
    direct = audit(frame, n_resamples=20, n_permutations=20, tie_threshold=0.05,
                   constant_within="skip")
    assert results["agreement"]["within_task"] == json.loads(json.dumps(
        direct["agreement"]["within_task"]))
    assert (results["settings"]["tie_threshold"], results["settings"]["constant_within"]) == (
        0.05, "skip")
    assert "tie:0.05" in results["signature"] and "constant:skip" in results["signature"]
    default = audit(frame, n_resamples=20, n_permutations=20)
    for metric in ("score.edit_sim", "score.exact_match"):  # (the options change the numbers)
        assert (results["agreement"]["within_task"][metric]["tau_darr"]["value"]
                != default["agreement"]["within_task"][metric]["tau_darr"]["value"])
    assert (results["agreement"]["within_task"]["score.exact_match"]["pearson"]["value"]
            != default["agreement"]["within_task"]["score.exact_match"]["pearson"]["value"])
    report = (tmp_path / "r" / "report.md").read_text()
    assert "differ by at most 0.05" in report and "is left out of that metric's mean" in report
    # run records them with its audited table; audit takes them from there
    study = tmp_path / "study"
    study.mkdir()
    write_generations(read_generations(slice_file), study / "generations.jsonl")
    (study / "study.toml").write_text('name = "sl\\u001b[41mice"\n[rating]\nmin = 0\nmax = 4\n')
    assert main(["run", str(study), "-o", str(tmp_path / "out"), "--scorers",
                 "edit_sim,exact_match", "--no-progress", "--repeats", "2", "--bootstrap", "10",
                 *draws, "--constant-within", "skip"]) == 0
    ran = json.loads((tmp_path / "out" / "report" / "results.json").read_text())
    assert ran["settings"]["constant_within"] == "skip"
    # (the study's name as text: a terminal escape in it is shown, not sent)
    assert "rows of 'sl\\x1b[41mice' with" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "out" / "audited.jsonl"), "-o",
                 str(tmp_path / "again")]) == 0
    assert "constant_within=skip" in capsys.readouterr().err
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert again["agreement"] == ran["agreement"] and again["signature"] == ran["signature"]
