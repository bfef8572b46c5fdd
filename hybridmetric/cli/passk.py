"""``hybridmetric passk SCORES --k 1,10``: pass@k per system from a scored table."""

from __future__ import annotations

import argparse
import json
import unicodedata

import pandas as pd

from hybridmetric.cli.options import check_output, seed
from hybridmetric.io import atomic_path
from hybridmetric.sandbox import pass_at_k_table
from hybridmetric.scorers.pass_rate import PassRate
from hybridmetric.scoring import read_scores
from hybridmetric.signature import environment, say, signature, visible

PASSK_VERSION = "1"
DEFAULT_KS = (1, 10, 100)


def fewest_samples(frame: pd.DataFrame, by: str | None) -> int:
    """The fewest rows any task has (within each value of ``by``); 0 for no row."""
    if frame.empty:
        return 0
    keys = ["task_id"] if by is None or by not in frame.columns else [by, "task_id"]
    return int(frame.groupby(keys, dropna=False).size().min())


def parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--k expects comma-separated integers (e.g. 1,10,100), got {text!r}") \
            from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k expects integers of at least 1, got {text!r}")
    return ks


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "passk", help="pass@k per system (Chen et al. 2021's unbiased estimator)",
        description="pass@k per system: for each task, the unbiased estimator of Chen et al. "
                    "2021 over its n samples (rows) of which c passed every test; the mean over "
                    "tasks, with a 95% bootstrap interval over tasks.")
    parser.add_argument("scores", help="scores file written by 'hybridmetric score' with pass_rate")
    parser.add_argument("--k", help="comma-separated k values (default: those of 1,10,100 that "
                                     "every task has the samples for)")
    parser.add_argument("--column", default="score.pass",
                        help="the 0/1 column of whole-program passes (default score.pass; "
                             "score.ALIAS.pass for an aliased pass_rate)")
    parser.add_argument("--by", help="the column whose values are compared (default: system "
                                     "where the table has it, else one group)")
    parser.add_argument("--resamples", type=int, default=10000,
                        help="bootstrap resamples over tasks (0: no interval)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the bootstrap")
    parser.add_argument("--missing", default="refuse", choices=("refuse", "drop-rows"),
                        help="rows without a verdict (no tests: the column is empty): refuse, "
                             "or leave them out (default: refuse)")
    parser.add_argument("-o", "--output", help="write the table and its signature as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.output:
        check_output(args.output, folder=False, example="passk.json", scores=args.scores)
    frame, scorer_signatures, _ = read_scores(args.scores)
    if args.resamples < 0:
        raise ValueError(f"--resamples must be 0 or more, got {args.resamples}")
    if args.column not in frame.columns:
        verdicts = [c for c in frame.columns if c == "score.pass" or c.endswith(".pass")]
        hint = (f"; the table has {', '.join(verdicts)}: --column {verdicts[0]}" if verdicts
                else "; score the table with pass_rate first")
        raise ValueError(f"{args.scores} has no column {args.column!r}{hint}")
    dropped = 0
    if args.missing == "drop-rows" and args.column in frame.columns:
        judged = frame[args.column].notna()
        dropped = int((~judged).sum())
        frame = frame[judged]
    by = args.by or ("system" if "system" in frame.columns else None)
    if by is not None and by not in frame.columns:  # (before any note counted by it)
        raise ValueError(f"--by {by}: {args.scores} has no {by!r} column; columns: "
                         f"{', '.join(map(str, frame.columns))}")
    if args.k is None:  # the default ks that every task has the samples for
        fewest = fewest_samples(frame, by)
        ks = [k for k in DEFAULT_KS if k <= fewest] or [1]
        if len(ks) < len(DEFAULT_KS):
            say(f"note: pass@{', pass@'.join(str(k) for k in DEFAULT_KS if k not in ks)} "
                f"left out: a task has only {fewest} sample(s) (--k to choose)")
    else:
        ks = parse_ks(args.k)
    table = pass_at_k_table(frame, ks, column=args.column, by=by,
                            n_resamples=args.resamples, seed=args.seed)
    scorer = next((alias for alias in scorer_signatures
                   if args.column in PassRate.column_names(alias)), None)
    fields = {"passk": PASSK_VERSION, "k": ",".join(map(str, ks)), "column": args.column,
              "by": by or "none", "unit": "task", "missing": args.missing,
              "boot": args.resamples, "ci": 0.95, "seed": args.seed,
              **environment(["numpy", "pandas"])}
    sign = signature(fields)
    if dropped:
        say(f"note: {dropped} row(s) without a verdict in {args.column} left out")
    print(format_table(table, ks, args.resamples > 0, by or "group"))
    print(f"signature: {sign}")
    if scorer is not None:
        print(visible(f"{scorer}: {scorer_signatures[scorer]}"))
    if args.output:  # (atomically, in a folder made where missing, as the other outputs)
        with atomic_path(args.output) as temporary:
            temporary.write_text(json.dumps(
                {"signature": sign, "scorer_signature": scorer_signatures.get(scorer),
                 "scores": str(args.scores), "rows": table}, indent=2) + "\n", encoding="utf-8")
        print(f"pass@k -> {args.output}")
    return 0


def format_table(table: list[dict], ks: list[int], with_ci: bool, label: str) -> str:
    """A plain-text table: one line a group, pass@k in percent with its interval."""
    header = [visible(label), "tasks", "samples/task", *(f"pass@{k} (%)" for k in ks)]
    lines = []
    for row in table:
        spread = (str(row["min_samples"]) if row["min_samples"] == row["max_samples"]
                  else f"{row['min_samples']}-{row['max_samples']}")
        cells = [visible(str(row["group"])), str(row["tasks"]), spread]
        for k in ks:
            cell = f"{100 * row[f'pass@{k}']:.2f}"
            if with_ci:
                low, high = row[f"pass@{k}_ci"]
                cell += f" [{100 * low:.2f}, {100 * high:.2f}]"
            cells.append(cell)
        lines.append(cells)
    widths = [max(_shown(r[i]) for r in [header, *lines]) for i in range(len(header))]
    return "\n".join("  ".join(c + " " * (w - _shown(c)) if i == 0 else " " * (w - _shown(c)) + c
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in [header, *lines])


def _shown(text: str) -> int:
    """The columns ``text`` takes on a terminal: two for a wide character (模型), none for a
    combining one."""
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
