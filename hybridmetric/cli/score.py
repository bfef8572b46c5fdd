"""``hybridmetric score INPUT -o SCORES``: run scorers over generations."""

from __future__ import annotations

import argparse
import json
import sys

from hybridmetric.cli.options import add_scorer_options, build_scorers
from hybridmetric.cli.signals import interrupted
from hybridmetric.combine import HYBRID_COLUMN, MetricCard
from hybridmetric.io import atomic_path, write_generations
from hybridmetric.scoring import journal_path, score, signature_path

DEFAULT_SCORERS = "edit_sim,chrf,bleu,rouge_l,codebleu,exact_match"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("score", help="score generations",
                                 description="Score a generations file or study folder.")
    parser.add_argument("input", help="generations file (.jsonl/.csv/.parquet) or study folder")
    parser.add_argument("-o", "--output", required=True, help="scores file (.jsonl/.csv/.parquet)")
    add_scorer_options(parser, DEFAULT_SCORERS)
    parser.add_argument("--card", help="metric card from 'hybridmetric fit': adds score.hybrid "
                                       "(--scorers then defaults to the card's scorers)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run from its journal")
    parser.add_argument("--chunk-size", type=int, default=256, help="rows per journaled chunk")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    card = MetricCard.load(args.card) if args.card else None
    if args.scorers is None:
        args.scorers = (",".join(dict.fromkeys(f["scorer"] for f in card.data["features"]))
                        if card else DEFAULT_SCORERS)
    scorers = build_scorers(args)
    try:
        table = score(args.input, scorers, args.output, resume=args.resume,
                      chunk_size=args.chunk_size, progress=False if args.no_progress else None)
    except KeyboardInterrupt as stop:
        return interrupted(stop, journal_path(args.output))
    finally:
        for scorer in scorers:
            scorer.close()
    if card is not None:
        signatures = {s.alias: s.signature() for s in scorers}
        table[HYBRID_COLUMN] = card.apply(table, signatures, missing="nan")
        unscored = int(table[HYBRID_COLUMN].isna().sum())
        if unscored:
            lacking = table[card.features].isna().sum()
            print(f"note: {unscored} of {len(table)} rows lack a feature of the card ("
                  + ", ".join(f"{name}: {n} rows" for name, n in lacking[lacking > 0].items())
                  + "), so their score.hybrid is NaN (the hybrid needs each of its features, "
                  "whatever its weight)", file=sys.stderr)
        write_generations(table, args.output)
        sidecar = signature_path(args.output)
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        meta["hybrid"] = card.data["signature"]
        with atomic_path(sidecar) as temporary:
            temporary.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"scored {len(table)} rows -> {args.output} (signature: {signature_path(args.output)})",
          file=sys.stderr)
    return 0
