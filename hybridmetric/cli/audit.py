"""``hybridmetric audit SCORES -o REPORT_DIR``: metric-human agreement, significance, report."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
import pandas as pd

from hybridmetric.audit import audit, finite_values
from hybridmetric.cli.fit import FEW_RESAMPLES, parse_scale
from hybridmetric.cli.options import add_where_option, check_output, seed
from hybridmetric.cli.score import note_card_scale
from hybridmetric.combine import HYBRID_COLUMN, MetricCard
from hybridmetric.report import write_report
from hybridmetric.report.document import IN_SAMPLE_SOURCE
from hybridmetric.schema import repeated_rows, rows_label, select_rows, with_rater_mean
from hybridmetric.scoring import read_scored, signature_path
from hybridmetric.signature import say


def tie_threshold(text: str) -> float:
    """An argparse type: tau_darr's tie tolerance, a finite number of 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"a tie threshold is a number of 0 or more, got {text!r}")
    return value


def add_audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resamples", type=int, default=10000,
                        help="bootstrap resamples (over tasks) for CIs (default: 10000)")
    parser.add_argument("--permutations", type=int, default=10000,
                        help="permutations of the PERM-BOTH significance test (default: 10000)")
    parser.add_argument("--tie-threshold", type=tie_threshold, default=0.0, metavar="T",
                        help="tau_darr's ties: two rows of a task whose ratings, or whose metric "
                             "scores, differ by at most T are tied (default: 0, exact ties; "
                             "the permutation tests of tau_darr need 0)")
    parser.add_argument("--constant-within", choices=("zero", "skip"), default="zero",
                        help="within-task correlations, where a metric gives one score to a "
                             "task's rows that the ratings score apart: count that task 0, so "
                             "that every metric is averaged over the same tasks (zero, the "
                             "default), or leave it out of that metric's mean (skip: "
                             "mt-metrics-eval's default)")


def note_few_draws(resamples: int, permutations: int) -> None:
    """Say where ``--resamples`` or ``--permutations`` are too few for what they give: a 95%
    interval whose tails (2.5% of the resamples each) hold less than one resample, p-values
    that cannot fall below 1/(permutations + 1)."""
    if 0 < resamples < FEW_RESAMPLES:
        say(f"note: --resamples {resamples} gives the 95% CIs from {resamples} resamples; "
            f"their tails need at least {FEW_RESAMPLES} (the default is 10000): read them as "
            "rough")
    if 0 < permutations < FEW_RESAMPLES:
        say(f"note: --permutations {permutations} gives p-values of at least "
            f"1/{permutations + 1} = {1 / (permutations + 1):.3g} (the default is 10000)")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("audit", help="audit metric-human agreement and write a report",
                                 description="Correlate every metric (and the hybrid) with the "
                                             "human ratings, test the gains, write a report.")
    parser.add_argument("scores", help="scores file written by 'hybridmetric score' (or "
                                       "run's audited.jsonl, whose audit settings are the "
                                       "defaults of the options below)")
    parser.add_argument("-o", "--output", required=True, help="report folder")
    parser.add_argument("--card", help="metric card: adds score.hybrid when it is missing")
    parser.add_argument("--target", help="the human rating column (default: rating)")
    parser.add_argument("--metrics", help="comma-separated score columns (default: all)")
    parser.add_argument("--focus", help="the metric compared with every other one "
                                        "(default: score.hybrid, else the best)")
    parser.add_argument("--seed", type=seed, help="seed of resamples and permutations (default: 0)")
    parser.add_argument("--scale", help="the rating scale MIN,MAX (grade bins of the pass/fail "
                                        "comparison; default: observed range)")
    parser.add_argument("--useful", type=float, help="the lowest rating of useful code, for the "
                                                     "pass/fail comparison (default: the middle "
                                                     "of the scale)")
    parser.add_argument("--missing", choices=("refuse", "drop-rows"),
                        help="what to do with rows missing a metric or the rating "
                             "(default: refuse)")
    add_where_option(parser, "audit")
    add_audit_options(parser)
    parser.set_defaults(func=run, resamples=None, permutations=None, tie_threshold=None,
                        constant_within=None)


IN_SAMPLE = ("if the card was fitted on these rows its agreement is in-sample (optimistic); "
             "the card's cross-validated numbers are the honest ones")
#: The audit's settings where neither the command line nor the scores' sidecar gives them.
DEFAULTS = {"target": "rating", "scale": None, "useful": None, "missing": "refuse", "seed": 0,
            "resamples": 10000, "permutations": 10000, "tie_threshold": 0.0,
            "constant_within": "zero"}


def _valid(name: str, value: Any) -> bool:
    """Whether ``value`` may stand for the audit setting ``name`` (one read from a sidecar)."""
    def number(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)

    if name == "scale":
        return value is None or (isinstance(value, list) and len(value) == 2
                                 and all(map(number, value)) and value[0] < value[1])
    if name == "useful":
        return value is None or number(value)
    if name in ("seed", "resamples", "permutations"):
        return (isinstance(value, int) and not isinstance(value, bool)
                and value >= (0 if name == "seed" else 1))
    if name == "tie_threshold":
        return number(value) and value >= 0
    if name == "missing":
        return value in ("refuse", "drop-rows")
    if name == "constant_within":
        return value in ("zero", "skip")
    return isinstance(value, str) and value != ""


def settings(args: argparse.Namespace, recorded: Any, where: str) -> dict[str, Any]:
    """The audit's settings: each from the command line, else from ``recorded`` (those of the
    audit that wrote the table, in its sidecar ``where``: ``run``'s audited.jsonl; but its
    scale and useful rating only for its own target), else :data:`DEFAULTS`."""
    if recorded is None:
        recorded = {}
    if not isinstance(recorded, dict):
        raise ValueError(f"{where}: 'audit' should hold the settings of the audit that wrote the "
                         f"table (an object), not {recorded!r}")
    given = {"target": args.target, "scale": parse_scale(args.scale), "useful": args.useful,
             "missing": args.missing, "seed": args.seed, "resamples": args.resamples,
             "permutations": args.permutations, "tie_threshold": args.tie_threshold,
             "constant_within": args.constant_within}
    if args.target is not None and args.target != recorded.get("target"):
        recorded = {k: v for k, v in recorded.items() if k not in ("scale", "useful")}
    chosen, taken = {}, []
    for name, value in given.items():
        if value is None and name in recorded:
            value = recorded[name]
            if not _valid(name, value):
                raise ValueError(f"{where}: the recorded audit setting {name!r} is {value!r}, "
                                 f"which is not one; give --{name.replace('_', '-')} instead")
            if value is not None:  # (None: the default, as were it not recorded)
                taken.append(f"{name}={value}")
            value = tuple(value) if name == "scale" and value is not None else value
        chosen[name] = DEFAULTS[name] if value is None else value
    if taken:
        say(f"note: as recorded with the table ({where}): {', '.join(taken)}")
    return chosen


def note_dropped(frame: pd.DataFrame, results: dict[str, Any]) -> None:
    """Say which rows the audit left out for a missing value (``--missing drop-rows``), by file
    and line: the results count them only (where they came from is no statistic)."""
    if not results.get("n_dropped_rows"):
        return
    gaps = ~finite_values(frame, [results["target"], *results["metrics"]]).all(axis=1)
    columns = ", ".join(f"{column} ({n})" for column, n in
                        (results.get("dropped") or {}).get("by_column", {}).items())
    say(f"note: {results['n_dropped_rows']} row(s) left out for a missing value"
        + (f" in {columns}" if columns else "")
        + f": {rows_label(frame, np.flatnonzero(gaps))}")


def run(args: argparse.Namespace) -> int:
    check_output(args.output, folder=True, example="report.md, results.json and the plots")
    frame, meta = read_scored(args.scores)
    signatures = dict(meta["scorers"])
    chosen = settings(args, meta.get("audit"), str(signature_path(args.scores)))
    note_few_draws(chosen["resamples"], chosen["permutations"])
    frame, note = with_rater_mean(frame, chosen["target"])
    if note:
        say(note)
    for repeated in repeated_rows(select_rows(frame, args.where) if args.where else frame):
        say(f"hybridmetric: note: {repeated}")
    card, hybrid = None, None
    if args.card:
        card = MetricCard.load(args.card)
    applied = meta.get("hybrid") if isinstance(meta.get("hybrid"), str) else None
    if card is not None and HYBRID_COLUMN in frame.columns and applied != card.data["signature"]:
        # (the report would show the card's model and weights beside another's predictions;
        # a score.hybrid whose sidecar names no card, read_scored refused)
        raise ValueError(f"{args.scores} already holds {HYBRID_COLUMN}, made by the card whose "
                         f"signature {signature_path(args.scores)} records ({applied}), not "
                         f"by the card {args.card} ({card.data['signature']}): audit it without "
                         "--card, give the card that made it, or score the rows again "
                         "(hybridmetric score --card) with this one")
    if HYBRID_COLUMN in frame.columns:
        if isinstance(meta.get("hybrid_source"), str):  # run's out-of-fold predictions
            hybrid = meta["hybrid_source"]
        else:  # written by score --card
            hybrid = (f"a metric card applied by 'hybridmetric score --card' ({IN_SAMPLE_SOURCE})"
                      f"; the card's signature: {applied}")
            say(f"note: score.hybrid comes from a metric card; {IN_SAMPLE}")
    elif card is not None:
        frame[HYBRID_COLUMN] = card.apply(frame, signatures, missing="nan")
        hybrid = (f"the card {args.card} applied to these rows ({IN_SAMPLE_SOURCE}); its "
                  f"signature: {card.data['signature']}")
        say(f"note: score.hybrid was computed by applying the card; {IN_SAMPLE}")
        note_card_scale(card, chosen["scale"], "the audit's scale")
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    results = audit(frame, metrics=metrics, target=chosen["target"], seed=chosen["seed"],
                    n_resamples=chosen["resamples"], n_permutations=chosen["permutations"],
                    focus=args.focus, scale=chosen["scale"], missing=chosen["missing"],
                    useful_threshold=chosen["useful"], where=args.where,
                    tie_threshold=chosen["tie_threshold"],
                    constant_within=chosen["constant_within"])
    if args.where:  # the rows audited (their lines, for the note and the report's plots)
        frame = select_rows(frame, args.where)
    note_dropped(frame, results)
    paths = write_report(results, frame, args.output, card=card.data if card else None,
                         scorers=signatures, hybrid=hybrid)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
