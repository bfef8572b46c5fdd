"""A Python program's shared tail (``Program.tail_at``: a task's tests, after each candidate) is
compiled once for all the programs that share it, and the two parts run as the whole file does;
where they could not, the whole is compiled as before."""

from __future__ import annotations

import marshal
import traceback
from types import CodeType

import pytest

from hybridmetric.sandbox import FAILED, PASSED, SYNTAX_ERROR, Limits, Program, Sandbox, launcher
from hybridmetric.sandbox.launcher import precompile

PATH = "/work/program.py"
TAIL = ("\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
        "    assert candidate(2) == 3, 'second'\n\ncheck(f)\n")
HEADS = {
    "passes": "def f(x):\n    return x + 1\n",
    "fails_in_the_tail": "from typing import List\n\n\ndef f(x):\n    return 2 * x\n",
    "ends_in_a_block": "def f(x):\n    if x:\n        return x + 1\n",
    "raises_in_the_head": "def f(x):\n    return x + 1\n\n[][0]\n",
}


def _run(parts: tuple[CodeType, ...]) -> tuple[dict, list[tuple[str, int, str]]]:
    """The namespace (plain values) and the traceback (file, line, function) the code leaves."""
    namespace: dict = {"__name__": "__main__"}
    frames = []
    try:
        for part in parts:
            exec(part, namespace)
    except Exception as exc:  # noqa: BLE001 - what the program raised is what is compared
        frames = [(frame.filename, frame.lineno, frame.name)
                  for frame in traceback.extract_tb(exc.__traceback__)[1:]]
    plain = {name: value for name, value in namespace.items()
             if isinstance(value, (int, str, dict)) and name != "__builtins__"}
    return plain, frames


def _parts(source: str, at: int | None) -> tuple[CodeType, ...]:
    code = precompile(source, PATH, at)
    assert isinstance(code, bytes), code
    return marshal.loads(code)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_the_two_parts_run_as_the_whole_file(name: str) -> None:
    source = HEADS[name] + TAIL
    parts = _parts(source, len(HEADS[name]))
    assert len(parts) == 2
    assert _run(parts) == _run((compile(source, PATH, "exec", dont_inherit=True),))


def test_a_tail_is_compiled_once_for_the_programs_that_share_it() -> None:
    launcher._shared_tail.cache_clear()
    for head in HEADS.values():
        assert len(_parts(head + TAIL, len(head))) == 2
    info = launcher._shared_tail.cache_info()
    assert (info.misses, info.hits) == (1, len(HEADS) - 1)
    # its functions sit where they are in each program's file (tracebacks, inspect.getsource)
    head = HEADS["fails_in_the_tail"]
    check = next(value for value in _parts(head + TAIL, len(head))[1].co_consts
                 if isinstance(value, CodeType))
    assert check.co_firstlineno == head.count("\n") + 3
    assert max(line for _, _, line in check.co_lines() if line) == head.count("\n") + 5


def test_a_head_s_future_features_reach_its_tail() -> None:
    tail = ("import inspect\n\ndef g(x: Undefined) -> None:\n    pass\n\n"
            "result = inspect.get_annotations(g)\n")
    postponed = "from __future__ import annotations\nx = 1\n"
    parts = _parts(postponed + tail, len(postponed))
    assert len(parts) == 2
    assert _run(parts)[0]["result"] == {"x": "Undefined", "return": "None"}
    # the same tail after a head without them: its own code, which fails as the whole does
    plain = "x = 1\n"
    parts = _parts(plain + tail, len(plain))
    assert len(parts) == 2
    assert _run(parts)[1] == [(PATH, 4, "<module>")]


# (head, tail) that must not be split: each part alone would compile otherwise, or run
# otherwise, than within the whole file
UNSPLIT = {
    "tail_continues_a_block": ("def f():\n    x = 1\n", "    return x\n\nassert f() == 1\n"),
    "tail_is_a_clause": ("if False:\n    y = 1\n", "else:\n    y = 2\nassert y == 2\n"),
    "head_ends_mid_line": ("x = 1", "0\nassert x == 10\n"),
    "head_ends_in_a_bracket": ("x = (1,\n", "2)\nassert x == (1, 2)\n"),
    "head_ends_in_a_string": ('s = """a\n', 'b"""\nassert s == "a\\nb"\n'),
    "head_ends_in_a_decorator": ("import functools\n@functools.cache\n", "def f():\n    pass\n"),
    "tail_has_a_docstring": ("x = 1\n", '"""doc"""\nassert __doc__ is None\n'),
    "tail_has_annotations": ("x = 1\n", "y: int = 2\nassert __annotations__ == {'y': int}\n"),
    "tail_names_future": ("x = 1\n", "import __future__\nassert x == 1\n"),
    "head_declares_coding": ("# coding: latin-1\nx = 1\n", "s = 'abc'\nassert len(s) == 3\n"),
    "tail_declares_coding": ("x = 1\n", "# -*- coding: latin-1 -*-\nassert x == 1\n"),
    "tail_starts_with_a_bom": ("x = 1\n", "\ufeffassert x == 1\n"),
    "empty_tail": ("x = 1\nassert x == 1\n", ""),
    # a frame takes its builtins as it starts: within the whole, the tail's are the file's own
    "head_rebinds_builtins": ("import builtins\n__builtins__ = {**vars(builtins), 'abs': len}\n",
                              "assert abs(-5) == 5\n"),
}


@pytest.mark.parametrize("name", sorted(UNSPLIT))
def test_parts_that_would_not_act_as_the_whole_are_compiled_whole(name: str) -> None:
    head, tail = UNSPLIT[name]
    source = head + tail
    assert precompile(source, PATH, len(head)) == precompile(source, PATH)
    whole = precompile(source, PATH)
    if isinstance(whole, bytes):
        assert len(marshal.loads(whole)) == 1


@pytest.mark.parametrize(("head", "tail"), [
    ("x = 1\n", "from __future__ import annotations\n"),  # not at the file's start
    ("x = 1\n", "assert (x, 'always true')\n"),  # a warning: the child compiles it, and shows it
    ("x = (\n", "\n"),  # the head's error, not the tail's
    ("x = 1\n", "y = (\n"),
])
def test_a_program_that_does_not_compile_cleanly_is_as_without_a_tail(head: str, tail: str) -> None:
    source = head + tail
    assert precompile(source, PATH, len(head)) == precompile(source, PATH)


def test_tail_at_must_be_a_position_in_the_source() -> None:
    for wrong in (-1, 4, 1.0, True):
        with pytest.raises(ValueError, match="tail_at must be a position in the source"):
            Program("python", "x=1", tail_at=wrong)
    assert Program("python", "x=1", tail_at=3).tail_at == 3


LIMITS = Limits(timeout_s=5.0, memory_mb=512)


def test_in_the_sandbox_a_split_program_ends_as_the_whole_does(sandbox: Sandbox) -> None:
    """Same verdict and same error text with ``tail_at`` as without (two runs: ``tail_at`` is no
    part of a verdict's key, so one run would run each program once)."""
    heads = [*HEADS.values(), "x = (\n", "def f(x):\n    return x\nimport sys\nsys.exit(0)\n"]
    tails = [TAIL, TAIL + "print(undefined)\n", "\ndef check(c):\n    assert c(1) == 2\n(\n"]
    sources = [(head + tail, len(head)) for head in heads for tail in tails]
    split = sandbox.run([Program("python", source, LIMITS, tail_at=at) for source, at in sources])
    whole = sandbox.run([Program("python", source, LIMITS) for source, _ in sources])
    for (source, _), one, other in zip(sources, split, whole, strict=True):
        assert (one.outcome, one.error) == (other.outcome, other.error), source
    assert {PASSED, FAILED, SYNTAX_ERROR} <= {result.outcome for result in split}
    # a byte order mark, which the worker drops, moves the tail one character
    head = HEADS["fails_in_the_tail"]
    [bom] = sandbox.run([Program("python", "\ufeff" + head + TAIL, LIMITS, tail_at=1 + len(head))])
    [plain] = sandbox.run([Program("python", head + TAIL, LIMITS)])
    assert (bom.outcome, bom.error) == (FAILED, plain.error)
    assert "line 10, in check" in bom.error
