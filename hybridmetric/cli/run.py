"""``hybridmetric run STUDY -o OUT_DIR``: the main job, score + fit + audit on a study.

Writes ``OUT_DIR/scores.jsonl`` (with its signature), ``OUT_DIR/card.json`` (the fitted hybrid),
``OUT_DIR/report/`` (report.html, report.md, results.json) and ``OUT_DIR/audited.jsonl``, the
table the audit judged (with its signature: the scorers', the card's and the audit's settings,
which ``hybridmetric audit`` takes up, so that auditing the file again gives the same numbers).
The ``score.hybrid`` column that the audit judges holds out-of-fold predictions (each task
predicted by a model fitted without it, the card's first cross-validation repeat), so the hybrid
is not credited with in-sample fit. Where PASS and EDIT-SIM exist, ``score.dibia_combined`` =
min(1, PASS + EDIT-SIM) (Dibia et al. 2022) is added before the audit, as a baseline (it is not a
feature of the hybrid).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from hybridmetric.audit import audit, systems_of
from hybridmetric.cli.audit import add_audit_options, note_dropped, note_few_draws
from hybridmetric.cli.fit import add_fit_options, fit_options
from hybridmetric.cli.options import (
    add_scorer_options,
    build_scorers,
    check_output,
    progress_of,
)
from hybridmetric.cli.score import DEFAULT_SCORERS
from hybridmetric.cli.signals import interrupted
from hybridmetric.combine import (
    HYBRID_COLUMN,
    RATER_MODELS,
    check_folds,
    dibia_columns,
    dibia_combined,
    fit_card,
    fit_gaps,
)
from hybridmetric.io import read_study
from hybridmetric.report import write_report
from hybridmetric.schema import (
    check_grades_on_scale,
    numbers,
    row_label,
    score_column,
    with_rater_mean,
)
from hybridmetric.scorers import Scorer
from hybridmetric.scoring import journal_path, read_sidecar, score, write_scores
from hybridmetric.signature import say

#: CodeBERTScore twice: on the code alone (``score.codebertscore.*``: not the scorer's default,
#: which encodes the intent), and with the intent encoded as context
#: (``score.codebertscore_intent.*``).
CODEBERTSCORE = ("codebertscore", "codebertscore_intent=codebertscore")
CODEBERTSCORE_SETTINGS = ("codebertscore.use_context=false",
                          "codebertscore_intent.use_context=true")
DIBIA_COLUMN = "score.dibia_combined"
#: Where the audited table's ``score.hybrid`` comes from, as the report and its sidecar say.
OUT_OF_FOLD = ("out-of-fold predictions: each row's from the fit (first cross-validation repeat) "
               "that did not see its task")
#: What the hybrid is fitted on by default.
FEATURES_HELP = ("one column per scorer: F1 for CodeBERTScore, the pass rate for pass_rate; "
                 "not dibia_combined, a baseline")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("run", help="the main job: score, fit and audit a study",
                                 description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("study", help="study folder (generations.jsonl + study.toml)")
    parser.add_argument("-o", "--output", required=True, help="output folder")
    add_scorer_options(parser, "every applicable scorer")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted scoring")
    add_fit_options(parser, features=FEATURES_HELP, missing="drop-rows")
    add_audit_options(parser)
    parser.set_defaults(func=run)


def default_features(scorers: Sequence[Scorer]) -> list[str]:
    """The hybrid's default features: one column per scorer (its F1 where it has one, else its
    first: CodeBERTScore's F1, pass_rate's pass rate), but Dibia et al.'s COMBINED, a baseline
    that is itself a blend of two of them."""
    columns = []
    for scorer in scorers:
        if scorer.name != "dibia_combined":
            f1 = [c for c in scorer.columns if c.endswith(".f1")]
            columns.append(f1[0] if f1 else scorer.columns[0])
    return columns


def default_scorers(has_tests: bool, has_context: bool) -> tuple[str, list[str]]:
    """The scorers (and settings) that apply to a study: all of them where the data allows."""
    entries = DEFAULT_SCORERS.split(",") + list(CODEBERTSCORE if has_context else CODEBERTSCORE[:1])
    settings = CODEBERTSCORE_SETTINGS if has_context else CODEBERTSCORE_SETTINGS[:1]
    if has_tests:
        entries.append("pass_rate")
    return ",".join(entries), list(settings)


def _check_target(frame: pd.DataFrame, target: str, scale: tuple[float, float] | None,
                  model: str) -> pd.Series:
    """Refuse, before any scoring, a study whose target column is absent or leaves its scale
    (and, for the models trained on raters, whose raters' grades do); else its values."""
    if target not in frame.columns:
        raise ValueError(f"the study has no '{target}' column to fit and audit against (its "
                         f"columns: {', '.join(map(str, frame.columns))}); choose one with "
                         "--target")
    values = pd.Series(numbers(frame, target))  # (ValueError: text, naming its line)
    if values.nunique() < 2:
        raise ValueError(f"'{target}' takes fewer than two values in the study: no hybrid can be "
                         "fitted to it, nor agreement with it measured")
    if model in RATER_MODELS:
        _check_grades(frame, model)
    if scale is None:
        return values
    check_grades_on_scale(frame, scale, target)
    outside = (values < scale[0]) | (values > scale[1])
    if outside.any():
        row = int(np.flatnonzero(outside.to_numpy())[0])
        raise ValueError(f"{int(outside.sum())} value(s) of '{target}' lie outside the study's "
                         f"scale {scale[0]:g} to {scale[1]:g} (study.toml [rating] min and max), "
                         f"e.g. {row_label(frame, row)} (task {frame['task_id'].iloc[row]!r}): "
                         f"{float(values.iloc[row])!r}")
    return values


def _check_grades(frame: pd.DataFrame, model: str) -> None:
    """The models trained on each rater's grade need a ``ratings`` column (the schema made its
    grades finite numbers; :func:`check_grades_on_scale` holds them to the scale), with
    integer grades for ``ordinal``."""
    graded = "ratings" in frame.columns and any(isinstance(r, dict) and r for r in frame["ratings"])
    if not graded:
        raise ValueError(f"--model {model} trains on each rater's grade, from a 'ratings' column "
                         "({rater: grade} per row), which no row of the study has; use --model "
                         "nonneg")
    for row, ratings in enumerate(frame["ratings"]):
        if not isinstance(ratings, dict):
            continue  # a row without grades: fit leaves it out or refuses, as --missing says
        for rater, grade in ratings.items():
            task = frame["task_id"].iloc[row]
            where = f"{row_label(frame, row)} (task {task!r}), rater {rater!r}"
            if model == "ordinal" and grade != int(grade):
                raise ValueError(f"the grade of {where} is {grade!r}: --model ordinal needs "
                                 "integer grades (Likert classes)")


def run(args: argparse.Namespace) -> int:
    check_output(args.output, folder=True, example="the scores, the card and the report")
    study = read_study(args.study)
    frame = study.generations
    if args.scorers is None:
        has_tests = "tests" in frame.columns and frame["tests"].notna().any()
        has_context = "context" in frame.columns and frame["context"].notna().any()
        args.scorers, defaults = default_scorers(has_tests, has_context)
        args.settings = defaults + args.settings
    frame, note = with_rater_mean(frame, args.target)
    if note:
        say(note)
    target = _check_target(frame, args.target, study.scale, args.model)
    systems_of(frame)  # (before any scoring: rows that name no system where others do)
    rated = frame.loc[target.notna().to_numpy(), "task_id"]
    check_folds(rated.astype(str).nunique(), args.folds, args.repeats)
    out = Path(args.output)
    scorers = build_scorers(args)
    options = fit_options(args)
    note_few_draws(args.resamples, args.permutations)
    produced = [c for s in scorers for c in s.columns]
    unknown = [f for f in options["features"] or () if score_column(f) not in produced]
    if unknown:  # (before scoring, which may take hours)
        raise ValueError(f"--features {', '.join(unknown)}: no selected scorer writes such a "
                         f"column; they write {', '.join(produced)}")
    if options["features"] is None and not default_features(scorers):
        raise ValueError("no selected scorer gives the hybrid a feature; select more scorers")
    say(f"[1/3] scoring {len(frame)} rows of {study.name!r} with {args.scorers}")
    try:
        table = score(study.path, scorers, out / "scores.jsonl", resume=args.resume,
                      progress=progress_of(args))
    except KeyboardInterrupt as stop:
        return interrupted(stop, journal_path(out / "scores.jsonl"))
    finally:
        for scorer in scorers:
            scorer.close()
    signatures = {s.alias: s.signature() for s in scorers}
    table, _ = with_rater_mean(table, args.target)  # (the scores file keeps the study's columns)
    baseline = dibia_columns(list(table.columns))
    if baseline is not None:  # Dibia et al.'s COMBINED, audited beside the single metrics
        table[DIBIA_COLUMN] = dibia_combined(table[baseline[0]].to_numpy(float),
                                             table[baseline[1]].to_numpy(float))
        signatures.setdefault("dibia_combined", f"min(1, {baseline[0]} + {baseline[1]}), "
                                                "computed by run from the scores")
    if options["features"] is None:
        present = default_features(scorers)
        fitted = _fitted_rows(table, args.target, present, args.model)
        constant = [f for f in present if table.loc[fitted, f].nunique() < 2]
        if constant:
            one = len(constant) == 1
            say(f"note: {', '.join(constant)} {'takes' if one else 'take'} one value "
                f"on the rows the hybrid is fitted on; {'it' if one else 'they'} cannot weigh "
                f"in it and {'is' if one else 'are'} left out of it")
        options["features"] = [f for f in present if f not in constant]
        if not options["features"]:
            raise ValueError("no metric varies on the rows the hybrid is fitted on: there is "
                             "no hybrid to fit (and no agreement to audit); score the study with "
                             "other scorers (--scorers)")
    say(f"[2/3] fitting the hybrid on "
        f"{', '.join(score_column(f) for f in options['features'])}")
    card = fit_card(table, scorer_signatures=signatures, scale=study.scale,
                    progress=progress_of(args), **options)
    card.save(out / "card.json")
    print(card.summary())
    table[HYBRID_COLUMN] = card.out_of_fold
    say("[3/3] auditing agreement with the ratings")
    results = audit(table, target=args.target, seed=args.seed, n_resamples=args.resamples,
                    n_permutations=args.permutations, missing=args.missing, scale=study.scale,
                    useful_threshold=study.useful, tie_threshold=args.tie_threshold,
                    constant_within=args.constant_within)
    note_dropped(table, results)
    paths = write_report(results, table, out / "report", card=card.data, scorers=signatures,
                         hybrid=OUT_OF_FOLD)
    settings = {"target": args.target, "scale": study.scale, "useful": study.useful,
                "missing": args.missing, "seed": args.seed, "resamples": args.resamples,
                "permutations": args.permutations, "tie_threshold": args.tie_threshold,
                "constant_within": args.constant_within}
    audited = write_audited(table, out, card.data["signature"], signatures, settings)
    print(f"scores: {out / 'scores.jsonl'}\ncard: {out / 'card.json'}\n"
          f"report: {paths['html']}\naudited rows: {audited}")
    return 0


def _fitted_rows(table: pd.DataFrame, target: str, features: Sequence[str],
                 model: str) -> np.ndarray:
    """Which rows of ``table`` the hybrid is fitted on (the others the fit drops, or refuses:
    :func:`~hybridmetric.combine.fit_gaps`)."""
    fitted = np.ones(len(table), dtype=bool)
    for rows in fit_gaps(table, target, features, model).values():
        fitted[rows] = False
    return fitted


def write_audited(table: pd.DataFrame, out: Path, card_signature: str,
                  signatures: dict[str, str], settings: dict[str, object]) -> Path:
    """Write ``out/audited.jsonl``, the rows as the audit judged them, and its sidecar: the
    scores' with the ``signatures`` of every score column (the baseline's too), the card's
    signature, where ``score.hybrid`` comes from (:data:`OUT_OF_FOLD`) and the audit's
    ``settings``."""
    path = out / "audited.jsonl"
    meta = read_sidecar(out / "scores.jsonl")
    meta.update(scorers=signatures, hybrid=card_signature, hybrid_source=OUT_OF_FOLD,
                audit=settings, n_rows=len(table))
    write_scores(table, path, meta)
    return path
