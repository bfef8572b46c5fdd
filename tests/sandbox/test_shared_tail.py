"""A Python program's shared tail (``Program.tail_at``: a task's tests, after each candidate) is
compiled once for all the programs that share it, and the two parts run as the whole file does;
where they could not, the whole is compiled as before."""

from __future__ import annotations

import contextlib
import io
import marshal
import random
import re
import sys
import traceback
from types import CodeType

import pytest

from hybridmetric.sandbox import FAILED, PASSED, SYNTAX_ERROR, Limits, Program, Sandbox, compiling
from hybridmetric.sandbox.compiling import precompile

PATH = "/work/program.py"
TAIL = ("\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
        "    assert candidate(2) == 3, 'second'\n\ncheck(f)\n")
HEADS = {
    "passes": "def f(x):\n    return x + 1\n",
    "fails_in_the_tail": "from typing import List\n\n\ndef f(x):\n    return 2 * x\n",
    "ends_in_a_block": "def f(x):\n    if x:\n        return x + 1\n",
    "raises_in_the_head": "def f(x):\n    return x + 1\n\n[][0]\n",
    "crlf": "def f(x):\r\n    return 2 * x\r\n",
    "lone_cr": "def f(x):\r    return 2 * x  # a line ends with a lone CR\r\n",
    "cr_in_a_string": 'def f(x):\n    """one\rtwo"""\n    return 2 * x\n',
}

# (head, tail) pairs whose two parts alone would compile, or run, otherwise than within the
# whole file: each must behave as its whole file (compiled whole where it cannot be split)
TRICKY = {
    "tail_continues_a_block": ("def f():\n    x = 1\n", "    return x\n\nassert f() == 1\n"),
    "tail_is_a_clause": ("if False:\n    y = 1\n", "else:\n    y = 2\nassert y == 2\n"),
    "head_ends_mid_line": ("x = 1", "0\nassert x == 10\n"),
    "head_ends_in_a_bracket": ("x = (1,\n", "2)\nassert x == (1, 2)\n"),
    "head_ends_in_a_string": ('s = """a\n', 'b"""\nassert s == "a\\nb"\n'),
    "head_ends_in_a_decorator": ("import functools\n@functools.cache\n", "def f():\n    pass\n"),
    "tail_has_a_docstring": ("x = 1\n", '"""doc"""\ndoc = __doc__\n'),
    "tail_has_annotations": ("seen = '__annotations__' in dir()\n", "y: int = 2\n"),
    # an annotated attribute: module annotations made, with no use of the name __annotations__
    "tail_annotates_an_attribute": ("seen = '__annotations__' in dir()\nclass C:\n    pass\n"
                                    "c = C()\n", "c.x: int = 5\n"),
    "tail_imports_from_future": ("x = 1\n", "from __future__ import annotations\n"),
    "tail_names_future": ("x = 1\n", "import __future__\nname = __future__.__name__\n"),
    # names as python reads them (NFKC): a fullwidth letter spells the same name
    "tail_imports_from_future_in_fullwidth": ("x = 1\n",
                                              "from __\uff46uture__ import annotations\n"),
    "head_traces_in_fullwidth": ("import sys\nevents = []\n"
                                 "sys.\uff53ettrace(lambda frame, event, arg: "
                                 "events.append(event))\n",
                                 "sys.settrace(None)\ncount = len(events)\n"),
    # within the whole, a module-level global after a use of its name is a syntax error
    "tail_declares_global": ("calls = 0\n", "global calls\ncalls = 1\n"),
    "head_declares_coding": ("# coding: latin-1\nx = 1\n", "s = '\u00e9'\nsize = len(s)\n"),
    "tail_declares_coding": ("x = 1\n", "# -*- coding: latin-1 -*-\ns = '\u00e9'\nn = len(s)\n"),
    "tail_starts_with_a_bom": ("x = 1\n", "\ufeffassert x == 1\n"),
    "empty_tail": ("x = 1\nassert x == 1\n", ""),
    "tail_warns": ("x = 1\n", "assert (x, 'always true')\n"),
    "head_fails_to_compile": ("x = (\n", "\n"),
    "tail_fails_to_compile": ("x = 1\n", "y = (\n"),
    # a frame takes its builtins as it starts: within the whole, the tail's are the file's own
    "head_rebinds_builtins": ("import builtins\n__builtins__ = {**vars(builtins), 'abs': len}\n",
                              "value = abs(-5)\n"),
    # a tracing hook would see the tail's code start a frame of its own
    "head_traces": ("import sys\nevents = []\n"
                    "sys.settrace(lambda frame, event, arg: events.append(event))\n",
                    "sys.settrace(None)\ncount = len(events)\n"),
    "head_keeps_its_frame": ("import sys\nframe = sys._getframe()\n", "line = frame.f_lineno\n"),
    # barry_as_FLUFL changes how a file parses when compile is given it, not when it imports it
    "head_imports_barry": ("from __future__ import barry_as_FLUFL\n", "differ = 1 <> 2\n"),
    "head_imports_barry_tail_evals": ("from __future__ import barry_as_FLUFL\n",
                                      "differ = eval('1 <> 2')\n"),
    # from 3.13 a class's first line is a constant of its code
    "tail_has_a_class": (HEADS["passes"], "class T:\n    pass\n\n"
                                          "first = getattr(T, '__firstlineno__', 0)\n"),
    # a head whose last line ends in a backslash (3.11 compiled it alone as if a blank line
    # followed, where CRLF ends it; within the whole the backslash joins the tail's first line)
    "head_ends_in_a_backslash_and_crlf": ("x = 1 \\\r\n", "def f():\n    return 1\n"),
    "head_ends_in_a_backslash": ("x = 1 \\\n", "+ 1\n"),
    "tail_reads_a_line": (HEADS["passes"],
                          "import sys\n\ndef where():\n    return sys._getframe().f_lineno\n\n"
                          "line = where()\n"),
}


def _run(parts: tuple[CodeType, ...]) -> tuple[dict, str, list[tuple[str, int, str]]]:
    """The namespace (plain values), what was printed and the traceback (file, line,
    function) the code leaves."""
    namespace: dict = {"__name__": "__main__"}
    frames = []
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            for part in parts:
                exec(part, namespace)
    except Exception as exc:  # noqa: BLE001 - what the program raised is what is compared
        frames = [(frame.filename, frame.lineno, frame.name)
                  for frame in traceback.extract_tb(exc.__traceback__)[1:]]
    finally:
        sys.settrace(None)
    plain = {name: value for name, value in namespace.items()
             if isinstance(value, (int, str, dict)) and name != "__builtins__"}
    return plain, printed.getvalue(), frames


def _behaviour(source: str, at: int | None) -> object:
    """What the program does with the code :func:`precompile` gives its child: its syntax
    error, None (the child compiles it), or what the code does (:func:`_run`)."""
    code = precompile(source, PATH, at)
    return _run(marshal.loads(code)) if isinstance(code, bytes) else code


def _parts(source: str, at: int | None) -> tuple[CodeType, ...]:
    code = precompile(source, PATH, at)
    assert isinstance(code, bytes), code
    return marshal.loads(code)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_the_two_parts_run_as_the_whole_file(name: str) -> None:
    source = HEADS[name] + TAIL
    parts = _parts(source, len(HEADS[name]))
    assert len(parts) == 2
    assert _run(parts) == _run((compile(source.encode(), PATH, "exec", dont_inherit=True),))
    assert len(_parts(source, None)) == 1  # (without tail_at: the whole)


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_a_program_split_or_not_behaves_as_its_whole_file(name: str) -> None:
    head, tail = TRICKY[name]
    source = head + tail
    assert _behaviour(source, len(head)) == _behaviour(source, None)


def test_a_tail_is_compiled_once_for_the_programs_that_share_it() -> None:
    compiling._shared_tail.cache_clear()
    for head in HEADS.values():
        assert len(_parts(head + TAIL, len(head))) == 2
    info = compiling._shared_tail.cache_info()
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
    assert _run(parts)[2] == [(PATH, 4, "<module>")]


def test_tail_at_must_be_a_position_in_the_source() -> None:
    for wrong in (-1, 4, 1.0, True):
        with pytest.raises(ValueError, match="tail_at must be a position in the source"):
            Program("python", "x=1", tail_at=wrong)
    assert Program("python", "x=1", tail_at=3).tail_at == 3


LIMITS = Limits(timeout_s=5.0, memory_mb=512)


#: First parts that attack the step between the two parts: the child runs the tail with its
#: own ``exec`` (not the builtin a program can replace), from no iterator a program could find
#: and exhaust; an audit hook would see that step's ``exec`` (a program that adds one is whole).
SKIPS_THE_TAIL = {
    "replaces_exec": "import builtins\nbuiltins.exec = lambda *args, **kwargs: None\n",
    "exhausts_iterators": ("import gc\nfor thing in gc.get_objects():\n"
                           "    if type(thing).__name__ == 'tuple_iterator':\n"
                           "        for _ in thing:\n            pass\n"),
    "audit_hook_stops_exec": ("import sys\n\ndef hook(event, args):\n    if event == 'exec':\n"
                              "        raise SystemExit(0)\n\nsys.addaudithook(hook)\n"),
}


def test_in_the_sandbox_a_split_program_ends_as_the_whole_does(sandbox: Sandbox) -> None:
    """Same verdict and same error text with ``tail_at`` as without (two runs: ``tail_at`` is no
    part of a verdict's key, so one run would run each program once)."""
    wrong = "def f(x):\n    return 0\n"
    heads = [*HEADS.values(), "x = (\n", "def f(x):\n    return x\nimport sys\nsys.exit(0)\n",
             *(wrong + attack for attack in SKIPS_THE_TAIL.values())]
    tails = [TAIL, TAIL + "print(undefined)\n", "\ndef check(c):\n    assert c(1) == 2\n(\n"]
    sources = [(head + tail, len(head)) for head in heads for tail in tails]
    split = sandbox.run([Program("python", source, LIMITS, tail_at=at) for source, at in sources])
    whole = sandbox.run([Program("python", source, LIMITS) for source, _ in sources])
    for (source, _), one, other in zip(sources, split, whole, strict=True):
        assert (one.outcome, one.error) == (other.outcome, other.error), source
    assert {PASSED, FAILED, SYNTAX_ERROR} <= {result.outcome for result in split}
    attacks = [result for (source, _), result in zip(sources, split, strict=True)
               if source.startswith(wrong) and source.endswith(TAIL)]
    assert [result.outcome for result in attacks] == [FAILED] * len(SKIPS_THE_TAIL)
    # a byte order mark, which the worker drops, moves the tail one character
    head = HEADS["fails_in_the_tail"]
    [bom] = sandbox.run([Program("python", "\ufeff" + head + TAIL, LIMITS, tail_at=1 + len(head))])
    [plain] = sandbox.run([Program("python", head + TAIL, LIMITS)])
    assert (bom.outcome, bom.error) == (FAILED, plain.error)
    assert "line 10, in check" in bom.error


def test_a_program_that_names_finally_is_compiled_in_its_child() -> None:
    """The compiler writes a ``finally`` block again at each way out of its ``try``, and within
    each block holding it: nested, 6 KiB took 25 s to compile. The worker, which no limit
    holds, leaves such programs to their child (under the program's limits); one without
    the word it compiles."""
    nested = "x = 0\n"
    for _ in range(20):
        nested = "try:\n    x = 1\nfinally:\n" + "".join(f"    {line}\n"
                                                       for line in nested.splitlines())
    assert precompile(nested, "/work/program.py") is None
    assert precompile(nested.replace("finally", "except Exception"), "/work/program.py")


#: What ``compiling._has_case_clause`` finds: a line that starts with the word ``case``.
CASE_CLAUSE = re.compile(r"(?:\A|[\n\r])[ \t\f]*case\b")


def test_a_case_clause_is_found_where_its_regular_expression_finds_it() -> None:
    """The worker's scan for a ``match`` statement's clause agrees with the expression that
    defines it, on lines built from its edge cases: each line end, indentation, what may follow
    the word (a Unicode letter or digit continues it, as ``\\b`` has it), the word within
    another, and at the text's ends."""
    pieces = ["case", "Case", "cases", "case_", "caseé", "case٣", "case:", "case(", "xcase",
              " ", "\t", "\f", "\v", "\n", "\r", "\r\n", "#", "é", "_", ""]
    rng = random.Random(0)
    texts = ["", "case", " case", "\ncase", "case\n", "x = 1\n  case 1:", "e\rcase x", "casecase"]
    texts += ["".join(rng.choices(pieces, k=rng.randint(1, 8))) for _ in range(20000)]
    found = [bool(CASE_CLAUSE.search(text)) for text in texts]
    assert [compiling._has_case_clause(text) for text in texts] == found
    assert 0.2 < sum(found) / len(found) < 0.8  # both answers well represented


def test_a_program_with_a_case_clause_is_compiled_in_its_child() -> None:
    """The compiler writes code again for each alternative of an or-pattern (in time cubic in
    its names): the worker leaves a program with a ``case`` clause to its child."""
    clause = "match 1:\n    case 1 | 2:\n        pass\n"
    assert precompile(clause, "/work/program.py") is None
    assert precompile("x = 'a case in words'\n", "/work/program.py")
