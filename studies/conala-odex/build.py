"""Build the CoNaLa x ODEX value study: human usefulness grades and unit tests for the same code.

Inputs:
- ``studies/conala/generations.jsonl`` (this repository): 472 CoNaLa intents x 5 systems with
  programmers' 0-4 usefulness grades (JetBrains "Out of the BLEU", Apache-2.0).
- ODEX ``data/en_test.jsonl`` (zorazrw/odex @ 21308ea6d474a078d5a85c61c2b5ca228d1fd167,
  CC BY-SA 4.0): unit tests for 439 English StackOverflow intents.

An intent is matched to an ODEX item when the two intent texts are equal after lowercasing and
collapsing whitespace; graded outputs of matched intents become rows (375 x 5 = 1,875). The output
is slotted where ODEX's canonical solution goes, so ``tests`` is the ODEX program template:
``prefix`` = the ODEX prompt (``def f_ID(params):\\n\\treturn `` or a statement slot),
``suffix`` = the ODEX suffix, and one case per ODEX test: ``test_start + test + check(f_ID)``.
ODEX's prompt parameters carry the names that the intent (and so the graded snippet) uses.

Nothing is dropped. Each row records, in ``exec_note``, why it cannot run as given:
``unk`` (a TranX ``<unk>`` token), ``slot`` (a backtick-quoted TranX slot value), ``print``
(the answer wrapped in ``print(...)``, which returns None), ``statement`` (a statement where ODEX
needs an expression, or the reverse), ``syntax`` (any other syntax error); empty when it
compiles. Such candidates are still executed and fail: a candidate that cannot run earns no PASS.
As under ODEX's own harness, the program imports only what ODEX's tests import, so an output
that uses another module (``os``, ``np``, ``re``, ...) fails with a NameError, its ``exec_note``
empty: PASS is ODEX's, not what a programmer who has the import would see.
Tests that cannot judge are excluded, with the row kept (grades, references) and ``tests`` null,
so that PASS is "not applicable", never a made-up fail:

- ``network-test``: the tests reach the network (they import requests, urllib, socket, ...
  without mocking them);
- ``tests-broken``: ODEX's own canonical solution does not pass them in hybridmetric's sandbox
  here (a package the tests import is not installed, e.g. bs4, flask, django, pytz, mock; or the
  tests rely on an older numpy/pandas/matplotlib API). The build runs every canonical solution
  and ``odex_check`` keeps the first line of its error.

Usage, from the repository root::

    python studies/conala-odex/build.py --odex ../shared/data/odex-conala-execution/en_test.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pandas as pd

from hybridmetric.scorers.pass_rate import PassRate

HERE = Path(__file__).resolve().parent
CONALA = HERE.parent / "conala" / "generations.jsonl"
NETWORK_LIBRARIES = {"requests", "urllib", "socket", "ftplib", "smtplib", "http", "selenium"}
TIMEOUT_S = 10


def normalize(intent: str) -> str:
    return " ".join(intent.lower().split())


def needs_network(item: dict) -> bool:
    tests = item["test_start"] + "".join(item["test"])
    return bool(NETWORK_LIBRARIES & set(item["library"])) and "mock" not in tests.lower()


def template(item: dict) -> dict:
    check = f"\ncheck({item['entry_point']})\n"
    return {
        "language": "python",
        "prefix": item["prompt"],
        "suffix": item["suffix"] + "\n",
        "cases": [item["test_start"] + test + check for test in item["test"]],
        "timeout_s": TIMEOUT_S,
    }


def exec_note(candidate: str, tests: dict) -> str:
    """Why ``candidate`` cannot run in the ODEX slot as given ('' when it compiles)."""
    try:
        compile(tests["prefix"] + candidate + tests["suffix"], "<candidate>", "exec")
    except SyntaxError:
        if "<unk>" in candidate or "< unk >" in candidate:
            return "unk"
        if "`" in candidate:
            return "slot"
        try:
            compile(candidate, "<candidate>", "exec")
        except SyntaxError:
            return "syntax"
        return "statement"
    if tests["prefix"].endswith("return ") and candidate.lstrip().startswith("print("):
        return "print"
    return ""


def check_canonical(items: list[dict]) -> dict[str, str]:
    """Run each item's canonical solution in the sandbox: intent -> '' (passes) or why not."""
    frame = pd.DataFrame({"task_id": [str(i) for i in range(len(items))],
                          "candidate": [item["canonical_solution"] for item in items],
                          "tests": [template(item) for item in items]})
    with PassRate() as scorer:
        scored = scorer.score(frame)
    verdicts = {}
    for item, passed, outcomes in zip(items, scored["score.pass"], scored["outcomes.pass_rate"],
                                      strict=True):
        failed = [o for o in outcomes if o["outcome"] != "passed"]
        error = failed[0]["error"].strip().splitlines()[-1:] if failed else []
        verdicts[normalize(item["intent"])] = "" if passed == 1.0 else (
            f"{failed[0]['outcome']}: {error[0] if error else ''}"[:200])
    return verdicts


def build_rows(conala: list[dict], odex: list[dict]) -> list[dict]:
    by_intent = {normalize(item["intent"]): item for item in odex}
    matched = {normalize(r["context"]): by_intent[normalize(r["context"])] for r in conala
               if normalize(r["context"]) in by_intent}
    runnable = [item for item in matched.values() if not needs_network(item)]
    canonical = check_canonical(runnable)
    rows = []
    for row in conala:
        item = matched.get(normalize(row["context"]))
        if item is None:
            continue
        row = dict(row, odex_task_id=str(item["task_id"]), odex_library=list(item["library"]))
        if needs_network(item):
            row.update(tests=None, exec_note="network-test", odex_check="")
        elif canonical[normalize(item["intent"])]:
            row.update(tests=None, exec_note="tests-broken",
                       odex_check=canonical[normalize(item["intent"])])
        else:
            tests = template(item)
            row.update(tests=tests, exec_note=exec_note(row["candidate"], tests), odex_check="")
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--odex", type=Path,
                        default=Path("../shared/data/odex-conala-execution/en_test.jsonl"))
    parser.add_argument("--conala", type=Path, default=CONALA)
    parser.add_argument("--output", type=Path, default=HERE / "generations.jsonl")
    args = parser.parse_args()
    conala = [json.loads(line) for line in args.conala.read_text("utf-8").splitlines()]
    odex = [json.loads(line) for line in args.odex.read_text("utf-8").splitlines()]
    rows = build_rows(conala, odex)
    with args.output.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    tasks = len({r["task_id"] for r in rows})
    print(f"{tasks} matched intents, {len(rows)} rows -> {args.output}")
    notes = Counter((r["system"], r["exec_note"] or "compiles") for r in rows)
    for (system, note), count in sorted(notes.items()):
        print(f"  {system:<18} {note:<13} {count}")


if __name__ == "__main__":
    main()
