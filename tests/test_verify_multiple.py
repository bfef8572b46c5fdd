"""``analysis/verify_multiple.py`` makes each MultiPL-E program as ``pass_rate`` makes its own:
the problem's tests, where the program ends with them, marked as the tail programs share."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from verify_multiple import problem_tests, shared_tail  # noqa: E402


def test_the_tail_starts_where_the_tests_do() -> None:
    program = "def f():\n    return 1\n\ndef check(c):\n    assert c() == 1\n\ncheck(f)\n"
    tests = "def check(c):\n    assert c() == 1\n\ncheck(f)\n"
    assert shared_tail(program, tests) == 23 == program.index("def check")
    assert shared_tail(program, tests + "#") is None  # another problem's tests
    assert shared_tail(program, "") is None
    assert shared_tail(program, None) is None  # no problem file


def test_problem_tests_come_from_the_problem_files_only(tmp_path: Path) -> None:
    root = tmp_path / "multipl_e" / "python-davinci-0.8-keep"
    root.mkdir(parents=True)
    (root / "HumanEval_0_f.yaml").write_text(yaml.safe_dump(
        {"name": "HumanEval_0_f", "prompt": "def f():\n", "tests": "check(f)\n",
         "completions": ["    return 1\n"]}))
    (root / "HumanEval_0_f.results.yaml").write_text(yaml.safe_dump(
        {"name": "HumanEval_0_f", "language": "py", "results": []}))
    assert problem_tests("python", tmp_path) == {"HumanEval_0_f": "check(f)\n"}
