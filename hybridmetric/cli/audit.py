"""``hybridmetric audit SCORES -o REPORT_DIR``: metric-human agreement, significance, report."""

from __future__ import annotations

import argparse
import sys

from hybridmetric.audit import audit
from hybridmetric.cli.fit import parse_scale
from hybridmetric.combine import HYBRID_COLUMN, MetricCard
from hybridmetric.report import write_report
from hybridmetric.schema import repeated_rows, with_rater_mean
from hybridmetric.scoring import read_scores


def add_audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resamples", type=int, default=10000,
                        help="bootstrap resamples (over tasks) for CIs")
    parser.add_argument("--permutations", type=int, default=10000,
                        help="permutations of the PERM-BOTH significance test")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("audit", help="audit metric-human agreement and write a report",
                                 description="Correlate every metric (and the hybrid) with the "
                                             "human ratings, test the gains, write a report.")
    parser.add_argument("scores", help="scores file written by 'hybridmetric score'")
    parser.add_argument("-o", "--output", required=True, help="report folder")
    parser.add_argument("--card", help="metric card: adds score.hybrid when it is missing")
    parser.add_argument("--target", default="rating", help="the human rating column")
    parser.add_argument("--metrics", help="comma-separated score columns (default: all)")
    parser.add_argument("--focus", help="the metric compared with every other one "
                                        "(default: score.hybrid, else the best)")
    parser.add_argument("--seed", type=int, default=0, help="seed of resamples and permutations")
    parser.add_argument("--scale", help="the rating scale MIN,MAX (grade bins of the pass/fail "
                                        "comparison; default: observed range)")
    parser.add_argument("--useful", type=float, help="the lowest rating of useful code, for the "
                                                     "pass/fail comparison (default: the middle "
                                                     "of the scale)")
    parser.add_argument("--missing", default="refuse", choices=("refuse", "drop-rows"),
                        help="what to do with rows missing a metric or the rating")
    add_audit_options(parser)
    parser.set_defaults(func=run)


IN_SAMPLE = ("if the card was fitted on these rows its agreement is in-sample (optimistic); "
             "the card's cross-validated numbers are the honest ones")


def run(args: argparse.Namespace) -> int:
    frame, signatures, applied = read_scores(args.scores)
    frame, note = with_rater_mean(frame, args.target)
    if note:
        print(note, file=sys.stderr)
    for repeated in repeated_rows(frame):
        print(f"hybridmetric: note: {repeated}", file=sys.stderr)
    card, hybrid = None, None
    if args.card:
        card = MetricCard.load(args.card)
    if HYBRID_COLUMN in frame.columns:
        if applied is not None:  # written by score --card
            hybrid = (f"a metric card applied by 'hybridmetric score --card' (in-sample where it "
                      f"was fitted on these rows); the card's signature: {applied}")
            print(f"note: score.hybrid comes from a metric card; {IN_SAMPLE}", file=sys.stderr)
    elif card is not None:
        frame[HYBRID_COLUMN] = card.apply(frame, signatures, missing="nan")
        hybrid = (f"the card {args.card} applied to these rows (in-sample where it was "
                  f"fitted on them); its signature: {card.data['signature']}")
        print(f"note: score.hybrid was computed by applying the card; {IN_SAMPLE}",
              file=sys.stderr)
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    results = audit(frame, metrics=metrics, target=args.target, seed=args.seed,
                    n_resamples=args.resamples, n_permutations=args.permutations,
                    focus=args.focus, scale=parse_scale(args.scale), missing=args.missing,
                    useful_threshold=args.useful)
    paths = write_report(results, frame, args.output, card=card.data if card else None,
                         scorers=signatures, hybrid=hybrid)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
