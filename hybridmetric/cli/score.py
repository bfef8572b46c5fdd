"""``hybridmetric score INPUT -o SCORES``: run scorers over generations."""

from __future__ import annotations

import argparse
import sys

from hybridmetric.cli.options import add_scorer_options, build_scorers
from hybridmetric.scoring import journal_path, score, signature_path

DEFAULT_SCORERS = "edit_sim,chrf,bleu,rouge_l,codebleu,exact_match"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("score", help="score generations",
                                 description="Score a generations file or study folder.")
    parser.add_argument("input", help="generations file (.jsonl/.csv/.parquet) or study folder")
    parser.add_argument("-o", "--output", required=True, help="scores file (.jsonl/.csv/.parquet)")
    add_scorer_options(parser, DEFAULT_SCORERS)
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run from its journal")
    parser.add_argument("--chunk-size", type=int, default=256, help="rows per journaled chunk")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scorers = build_scorers(args)
    try:
        table = score(args.input, scorers, args.output, resume=args.resume,
                      chunk_size=args.chunk_size, progress=False if args.no_progress else None)
    except KeyboardInterrupt:
        print(f"hybridmetric: interrupted; finished rows are kept in {journal_path(args.output)}; "
              "rerun with --resume to continue", file=sys.stderr)
        return 130
    finally:
        for scorer in scorers:
            scorer.close()
    print(f"scored {len(table)} rows -> {args.output} (signature: {signature_path(args.output)})",
          file=sys.stderr)
    return 0
