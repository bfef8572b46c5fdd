"""Build the CoNaLa study (generations.jsonl) from the JetBrains "Out of the BLEU" human grades.

Source: JetBrains-Research/codegen-metrics @ b630570dd513b471d941de1c85257e639a7e1a65,
``data/to-grade/conala/conala-human-grades.json`` (Apache-2.0): 472 unique CoNaLa test intents, the
outputs of 5 systems for each, graded 0-4 by 3-10 of 16 programmers.

One row per (intent, system): ``task_id`` = ``conala-NNN`` (the intent's position in the source
file), ``context`` = the intent, ``references`` = the reference snippet(s), ``ratings`` = each
rater's grade, ``rating`` = their mean. Nothing is dropped: the script stops if a row has no grade.

Usage, from the repository root::

    python studies/conala/build.py --source ../shared/data/conala-human-grades
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")
HERE = Path(__file__).resolve().parent


def build_rows(items: list[dict]) -> list[dict]:
    rows = []
    for position, item in enumerate(items):
        for system in SYSTEMS:
            ratings = {rater: float(grade) for rater, grade in item[f"grade-{system}"].items()}
            if not ratings:
                raise ValueError(f"item {position} ({item['intent']!r}), {system}: no grades")
            rows.append({
                "task_id": f"conala-{position:03d}",
                "system": system,
                "language": "python",
                "context": item["intent"],
                "candidate": item[system],
                "references": list(item["snippet"]),
                "rating": sum(ratings.values()) / len(ratings),
                "ratings": ratings,
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path("../shared/data/conala-human-grades"),
                        help="the conala-human-grades folder")
    parser.add_argument("--output", type=Path, default=HERE / "generations.jsonl")
    args = parser.parse_args()
    items = json.loads((args.source / "conala" / "conala-human-grades.json").read_text("utf-8"))
    rows = build_rows(items)
    with args.output.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(items)} intents x {len(SYSTEMS)} systems = {len(rows)} rows -> {args.output}")


if __name__ == "__main__":
    main()
