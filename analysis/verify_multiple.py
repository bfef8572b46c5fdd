"""Re-run MultiPL-E's recorded HumanEval programs through our sandbox and compare verdicts.

The CodeBERTScore data ships MultiPL-E's raw results (Codex davinci, temperature 0.8): every
generated program with the status MultiPL-E's harness recorded (OK, Exception, SyntaxError,
Timeout, ...). A program passes when its status is OK. This script runs each ``program`` in our
sandbox and prints, per language, the confusion table (recorded status x our outcome), the pass/fail
agreement, and the reasons for the disagreements.

    python analysis/verify_multiple.py --language python
    python analysis/verify_multiple.py --language cpp --sample 600 --seed 0

``--sample N`` runs a seeded random subset of N programs (numpy default_rng(seed)), for the
compiled languages whose full runs take hours on two cores. Each program is made as the
``pass_rate`` scorer makes its own: its problem's tests, which end every program of that problem,
marked as the tail they share (``Program.tail_at``), so that what is checked is what scoring runs.
"""

from __future__ import annotations

import argparse
import re
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from hybridmetric.sandbox import PASSED, Limits, Program, Sandbox

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data/codebertscore-humaneval/evaluation/data"
FOLDERS = {"python": "python", "javascript": "js", "cpp": "cpp", "java": "java"}


def load(language: str, extract_to: Path) -> list[tuple[str, int, str, str, str]]:
    """(problem, sample index, program, recorded status, recorded error line) for every
    recorded program."""
    folder = FOLDERS[language]
    root = extract_to / "multipl_e" / f"{folder}-davinci-0.8-keep"
    if not root.is_dir():
        archive = DATA / f"multipl_e_{folder}-davinci-0.8-keep.tar.gz"
        if not archive.is_file():
            sys.exit(f"missing {archive}: this script needs the shared data folder beside the repo")
        with tarfile.open(archive) as tar:
            tar.extractall(extract_to, filter="data")
    rows = []
    for path in sorted(root.glob("*.results.yaml")):
        with path.open() as handle:
            record = yaml.load(handle, Loader=yaml.CSafeLoader)
        for index, result in enumerate(record["results"]):
            rows.append((record["name"], index, result["program"], result["status"],
                         recorded_reason(result.get("stderr") or "")))
    return rows


def problems(language: str, extract_to: Path) -> list[dict]:
    """MultiPL-E's problem files (name, prompt, tests, completions), in name order (extracted
    by :func:`load`)."""
    root = extract_to / "multipl_e" / f"{FOLDERS[language]}-davinci-0.8-keep"
    records = []
    for path in sorted(root.glob("*.yaml")):
        if not path.name.endswith(".results.yaml"):
            with path.open() as handle:
                records.append(yaml.load(handle, Loader=yaml.CSafeLoader))
    return records


def problem_tests(language: str, extract_to: Path) -> dict[str, str]:
    """{problem: its tests}, from MultiPL-E's problem files."""
    return {record["name"]: record["tests"] for record in problems(language, extract_to)}


def shared_tail(program: str, tests: str | None) -> int | None:
    """Where ``program``'s tests begin, when it ends with them (see ``Program.tail_at``)."""
    return len(program) - len(tests) if tests and program.endswith(tests) else None


def recorded_reason(stderr: str) -> str:
    """The line of MultiPL-E's recorded stderr that names the error (Python: the last one)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    named = [line for line in lines if re.search(r"(Error|Exception)\b", line)]
    if not named:
        return lines[-1][:80] if lines else ""
    return (named[-1] if lines[0].startswith("Traceback") else named[0])[:80]


def reason(outcome: str, error: str) -> str:
    """A short label for why a run ended the way it did (the last informative error line)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        match = re.match(r"([A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b)", line)
        if match:
            return f"{outcome}: {match.group(1)}"
    for line in lines:
        if "Assertion `" in line or "error:" in line:
            return f"{outcome}: {re.sub(r'[0-9]+', 'N', line)[:70]}"
    return f"{outcome}: {lines[-1][:70] if lines else '(no output)'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=sorted(FOLDERS) + ["all"], default="python")
    parser.add_argument("--sample", type=int, default=0, help="seeded subset size; 0 = all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per program")
    parser.add_argument("--workers", type=int, default=0, help="0 = one per core")
    parser.add_argument("--cache", default=None,
                        help="SQLite result cache path (none, the default: no cache)")
    parser.add_argument("--extract-to", type=Path, default=Path("/tmp/hybridmetric-multiple"))
    parser.add_argument("--examples", type=int, default=3, help="examples per disagreement")
    args = parser.parse_args()
    languages = sorted(FOLDERS) if args.language == "all" else [args.language]
    cache = None if args.cache in (None, "none") else args.cache  # (as pass_rate.cache=none)
    with Sandbox(workers=args.workers, cache=cache) as sandbox:
        print(f"isolation: {sandbox.isolation}")
        for language in languages:
            verify(language, sandbox, args)


def verify(language: str, sandbox: Sandbox, args: argparse.Namespace) -> None:
    rows = load(language, args.extract_to)
    total = len(rows)
    if args.sample and args.sample < total:
        chosen = np.sort(np.random.default_rng(args.seed).choice(total, args.sample,
                                                                  replace=False))
        rows = [rows[i] for i in chosen]
    limits = Limits(timeout_s=args.timeout)
    tests = problem_tests(language, args.extract_to)
    programs = [Program(language, program, limits, tail_at=shared_tail(program, tests.get(name)))
                for name, _, program, _, _ in rows]
    print(f"\n{language}: {sum(p.tail_at is not None for p in programs)} of {len(programs)} "
          "programs end with their problem's tests (marked as the tail they share)")
    started = time.perf_counter()
    step = max(1, len(programs) // 20)

    def progress(done: int) -> None:
        if done % step == 0:
            rate = done / (time.perf_counter() - started)
            print(f"  {language}: {done}/{len(programs)} ({rate:.1f}/s)", file=sys.stderr,
                  flush=True)

    results = sandbox.run(programs, progress=progress)
    seconds = time.perf_counter() - started
    print(f"\n== {language}: {len(rows)} of {total} programs"
          + (f" (seeded sample, seed {args.seed})" if len(rows) < total else "")
          + f", {seconds:.0f} s, {len(rows) / seconds:.1f} programs/s")
    table = Counter((row[3], result.outcome) for row, result in zip(rows, results, strict=True))
    statuses = sorted({s for s, _ in table})
    outcomes = sorted({o for _, o in table})
    width = max(len(o) for o in outcomes) + 2
    print("recorded \\ ours".ljust(16) + "".join(o.rjust(width) for o in outcomes))
    for status in statuses:
        print(status.ljust(16) + "".join(str(table[status, o]).rjust(width) for o in outcomes))
    agree = sum(n for (s, o), n in table.items() if (s == "OK") == (o == PASSED))
    both = {(a, b): sum(n for (s, o), n in table.items()
                        if (s == "OK") == a and (o == PASSED) == b)
            for a in (True, False) for b in (True, False)}
    print(f"pass/fail: recorded pass & ours pass {both[True, True]}, recorded pass & ours fail "
          f"{both[True, False]}, recorded fail & ours pass {both[False, True]}, both fail "
          f"{both[False, False]}")
    print(f"agreement on pass/fail: {agree}/{len(rows)} = {100 * agree / len(rows):.2f}%")
    reasons: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for (name, index, _, status, recorded), result in zip(rows, results, strict=True):
        if (status == "OK") != (result.outcome == PASSED):
            said = f" ({recorded})" if recorded else ""
            label = f"recorded {status}{said} -> ours {reason(result.outcome, result.error)}"
            reasons[label] += 1
            examples.setdefault(label, []).append(f"{name}#{index}")
    if reasons:
        print("disagreements by reason:")
        for label, count in reasons.most_common():
            shown = ", ".join(examples[label][:args.examples])
            print(f"  {count:5d}  {label}   e.g. {shown}")


if __name__ == "__main__":
    main()
