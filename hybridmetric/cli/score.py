"""``hybridmetric score INPUT -o SCORES``: run scorers over generations."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hybridmetric import scorers as registry
from hybridmetric.cli.options import (
    add_scorer_options,
    build_scorers,
    check_output,
    progress_of,
)
from hybridmetric.cli.signals import interrupted
from hybridmetric.combine import HYBRID_COLUMN, MetricCard
from hybridmetric.io import read_study_meta
from hybridmetric.scoring import (
    DEFAULT_CHUNK,
    FIRST_CHUNK,
    ScoredAlready,
    journal_path,
    read_scores,
    read_sidecar,
    score,
    signature_path,
    write_scores,
)
from hybridmetric.signature import parse as parse_signature
from hybridmetric.signature import say

DEFAULT_SCORERS = "edit_sim,chrf,bleu,rouge_l,codebleu,exact_match"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("score", help="score generations",
                                 description="Score a generations file or study folder.")
    parser.add_argument("input", help="generations file (.jsonl/.csv/.parquet) or study folder")
    parser.add_argument("-o", "--output", required=True, help="scores file (.jsonl/.csv/.parquet)")
    add_scorer_options(parser, DEFAULT_SCORERS)
    parser.add_argument("--card", help="metric card from 'hybridmetric fit': adds score.hybrid "
                                       "(--scorers then defaults to the card's scorers, with "
                                       "the settings the card records)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run from its journal")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK,
                        help=f"the most rows a journaled chunk holds (default: {DEFAULT_CHUNK}; "
                             f"chunks start at {FIRST_CHUNK} rows and double)")
    parser.set_defaults(func=run)


def card_scorers(card: MetricCard) -> tuple[str, list[str]]:
    """The ``--scorers`` value (``ALIAS=SCORER`` where renamed) and the ``--set`` assignments
    that rebuild the scorers a card was fitted on, read from their signatures: every signed
    setting as the card has it (the unsigned ones, which change no number, keep their
    defaults)."""
    entries: dict[str, str] = {}
    assignments: list[str] = []
    for feature in card.data["features"]:
        alias = feature["scorer"]
        if alias in entries:
            continue
        fields = parse_signature(feature["signature"])
        name = fields.get("scorer", alias)
        entries[alias] = alias if name == alias else f"{alias}={name}"
        assignments += [f"{alias}.{key}={fields[key]}"
                        for key, setting in registry.get(name).settings_spec.items()
                        if setting.signed and key in fields]
    return ",".join(entries.values()), assignments


def note_card_scale(card: MetricCard, scale: tuple[float, float] | None, whose: str) -> None:
    """A note where the card's scale (its hybrid's range) is not ``scale``, the rating scale of
    the rows it is applied to (``whose``: "this study's scale", "the audit's scale"):
    ``score.hybrid`` stays on the card's."""
    fitted = tuple(card.data["scale"])
    if scale is not None and tuple(scale) != fitted:
        say(f"note: the card was fitted on ratings of {fitted[0]:g} to {fitted[1]:g} "
            f"({card.data.get('scale_source', 'given')}); {whose} is "
            f"{scale[0]:g} to {scale[1]:g}: score.hybrid stays on the card's scale")


def _holds_features(path: str, card: MetricCard) -> bool:
    """Whether the scores file ``path`` has the card's features, by the card's scorers."""
    try:
        frame, signatures, _ = read_scores(path)
        card.check(list(frame.columns), signatures)
    except (ValueError, OSError):  # (no sidecar, other columns or settings: a mismatch)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    check_output(args.output, folder=False, example="scores.jsonl")
    card = MetricCard.load(args.card) if args.card else None
    restored: list[str] = []
    if args.scorers is None:
        if card is None:
            args.scorers = DEFAULT_SCORERS
        else:  # the card's own scorers and settings (what the command line sets wins)
            args.scorers, restored = card_scorers(card)
    scorers = build_scorers(args, restored)
    if card is not None:  # before any row is scored, which may take hours
        card.check([c for s in scorers for c in s.columns],
                   {s.alias: s.signature() for s in scorers})
        if Path(args.input).is_dir():
            note_card_scale(card, read_study_meta(args.input).scale, "this study's scale")
    try:
        table = score(args.input, scorers, args.output, resume=args.resume,
                      chunk_size=args.chunk_size, progress=progress_of(args))
    except KeyboardInterrupt as stop:
        return interrupted(stop, journal_path(args.output))
    except ScoredAlready as error:
        if card is None or not _holds_features(args.input, card):
            raise
        raise ScoredAlready(f"{error}; it holds the card's features, scored with the card's "
                            "settings: hybridmetric audit INPUT --card CARD -o REPORT_DIR "
                            "applies the card to it and audits it") from None
    finally:
        for scorer in scorers:
            scorer.close()
    if card is not None:
        signatures = {s.alias: s.signature() for s in scorers}
        table[HYBRID_COLUMN] = card.apply(table, signatures, missing="nan")
        unscored = int(table[HYBRID_COLUMN].isna().sum())
        if unscored:
            lacking = (~np.isfinite(table[card.features].to_numpy(dtype=float))).sum(axis=0)
            say(f"note: {unscored} of {len(table)} rows lack a feature of the card, missing or "
                "infinite (" + ", ".join(f"{name}: {n} rows" for name, n
                                         in zip(card.features, lacking, strict=True) if n)
                + "), so their score.hybrid is NaN (the hybrid needs each of its features, "
                "whatever its weight)")
        write_scores(table, args.output, {**read_sidecar(args.output),
                                          "hybrid": card.data["signature"]})
    say(f"scored {len(table)} rows -> {args.output} (signature: {signature_path(args.output)})")
    return 0
