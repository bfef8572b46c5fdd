"""``hybridmetric fit SCORES -o CARD.json``: fit the hybrid metric and write its metric card."""

from __future__ import annotations

import argparse
import math

from hybridmetric.cli.options import add_where_option, check_output, seed
from hybridmetric.combine import MODELS, HybridMetric, fit_card
from hybridmetric.schema import repeated_rows, select_rows, with_rater_mean
from hybridmetric.scoring import read_scores
from hybridmetric.signature import say


def parse_scale(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--scale expects MIN,MAX (e.g. 0,4), got {text!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"--scale expects MIN,MAX with finite MIN < MAX, got {text!r}")
    return low, high


def add_fit_options(parser: argparse.ArgumentParser,
                    features: str = "every score.* column",
                    missing: str = "refuse") -> None:
    """The options of ``fit`` (and of ``run``, with its own default ``features`` and
    ``missing``)."""
    parser.add_argument("--target", default="rating", help="the human rating column")
    parser.add_argument("--features", help="comma-separated score columns, or the names of "
                                           f"scorers with one column (default: {features})")
    parser.add_argument("--model", default="nonneg", choices=MODELS, help="the combiner")
    parser.add_argument("--alpha", type=float,
                        help="ridge's penalty on the standardised features (--model ridge "
                             "only; default 1.0)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of folds and resamples")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (by task)")
    parser.add_argument("--repeats", type=int, default=10, help="cross-validation repeats")
    parser.add_argument("--bootstrap", type=int, default=200,
                        help="bootstrap resamples (over tasks) for the weights' CIs")
    parser.add_argument("--calibration", default="none", choices=("none", "isotonic"),
                        help="none: predictions clipped to the rating scale; isotonic: an "
                             "increasing map of them onto it, fitted on the training predictions")
    parser.add_argument("--missing", default=missing, choices=("refuse", "drop-rows"),
                        help="what to do with rows missing a feature or the target "
                             f"(default: {missing})")


#: Fewer bootstrap resamples than this leave a 95% interval's tails (2.5% of them each) less
#: than one resample: the interval is then little more than the resamples' range.
FEW_RESAMPLES = 40


def fit_options(args: argparse.Namespace) -> dict:
    features = [f.strip() for f in args.features.split(",")] if args.features else None
    if 0 < args.bootstrap < FEW_RESAMPLES:
        say(f"note: --bootstrap {args.bootstrap} gives the weights' 95% CIs from "
            f"{args.bootstrap} resamples; their tails need at least {FEW_RESAMPLES} (the "
            "default is 200): read them as rough")
    if args.alpha is not None and args.model != "ridge":
        raise ValueError(f"--alpha is ridge's penalty; --model {args.model} has none "
                         "(add --model ridge, or leave --alpha out)")
    alpha = 1.0 if args.alpha is None else args.alpha
    HybridMetric(model=args.model, alpha=alpha)._check_params()  # (run: before any scoring)
    return {"target": args.target, "features": features, "model": args.model,
            "alpha": alpha,
            "seed": args.seed, "folds": args.folds, "repeats": args.repeats,
            "n_boot": args.bootstrap, "calibration": args.calibration, "missing": args.missing}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("fit", help="fit the hybrid metric on rated scores",
                                 description="Fit a hybrid metric to human ratings, validate it "
                                             "on held-out tasks, and write its metric card.")
    parser.add_argument("scores", help="scores file written by 'hybridmetric score'")
    parser.add_argument("-o", "--output", required=True, help="metric card (.json)")
    parser.add_argument("--scale", help="the rating scale MIN,MAX (default: observed range)")
    add_fit_options(parser)
    add_where_option(parser, "fit on")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_output(args.output, folder=False, example="card.json", scores=args.scores)
    frame, signatures, _ = read_scores(args.scores)
    frame, note = with_rater_mean(frame, args.target)
    if note:
        say(note)
    for repeated in repeated_rows(select_rows(frame, args.where) if args.where else frame):
        say(f"hybridmetric: note: {repeated}")
    card = fit_card(frame, scorer_signatures=signatures, scale=parse_scale(args.scale),
                    progress=False if args.no_progress else None, where=args.where,
                    **fit_options(args))
    card.save(args.output)
    print(card.summary())
    print(f"card -> {args.output}")
    return 0
