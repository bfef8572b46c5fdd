"""Compiling a Python program in the worker, for its forked child to load.

The worker compiles a program before the fork server forks its child, so that a program that
does not compile needs no child, and neither the compiler's memory nor the program's code is
ever in the forking process (see ``launcher.py``). A task's tests, the same after each of its
candidates (``Program.tail_at``), are compiled once for all its programs where the two parts
run as the whole file would.
"""

from __future__ import annotations
import __future__

import functools
import marshal
import opcode
import warnings
from collections.abc import Iterator
from types import CodeType

from hybridmetric.sandbox.launcher import (
    _TAIL,
    COMPILE_ERRORS,
    _error_text,
    file_bytes,
    file_source,
)

#: Python sources of up to this many characters are compiled by the worker (:func:`precompile`)
#: and their code loaded by their own child; larger ones compiled in the child, under the
#: program's limits. (Loaded in the forking process, code would leave its identifiers there:
#: from Python 3.12 interned strings outlive the code, and a later program could find them.)
PRECOMPILE_MAX = 1 << 16
#: Python sources with more ``+`` than this are compiled in the child too, under the program's
#: time limit: the compiler folds a chain of constants (``'a' * 4096 + 'a' * 4096 + ...``) into
#: one, copying what it has so far at each ``+``, in time quadratic in the chain (1,000 terms:
#: over a second; a few such chains in 64 KiB took 42 s), which in the worker no limit would
#: stop. (HumanEval's programs have at most 22.)
PRECOMPILE_MAX_PLUS = 100
#: Python sources that name ``finally`` (anywhere: a word is checked, not parsed) are compiled in
#: the child too: the compiler writes a ``finally`` block's code again at each way out of its
#: ``try`` (each ``return``, ``break``, ``continue``, and the exception's), and again within each
#: block that holds it, so that 6 KiB of nested ``try``/``finally`` took 25 s to compile, and 50
#: KiB of one ``try`` with 1,200 ``return`` 236 MB, which in the worker no limit would stop. (Few
#: programs do: 19 of the 1,970 HumanEval programs ``bench_sandbox.py`` races, most in words.)
WORDS_COMPILED_IN_THE_CHILD = ("finally",)
#: Python sources with a line that starts with the word ``case`` (a ``match`` statement's
#: clause: ``case`` opens a logical line) are compiled in the child too: for each alternative
#: of an or-pattern that binds its names in another order, the compiler writes code that
#: reorders them, in time that grows with the cube of the names (10 alternatives of 400 names,
#: 19 KiB: 28 s; 2 of 400, 671 MB), which in the worker no limit would stop. (15 of the 1,981
#: HumanEval programs ``bench_sandbox.py`` runs have such a line, all in their docstrings.)
#: Found by :func:`_has_case_clause`.
CASE_CLAUSE = "case"
#: The compiler flags of the ``__future__`` features a program's first part turns on for its
#: shared tail too (see :func:`precompile`); but ``barry_as_FLUFL``, which changes how a file
#: parses only when given to ``compile``, not when the file imports it (and then only the code
#: that the file's own code compiles: a first part that imports it keeps the program whole).
BARRY_AS_FLUFL = __future__.barry_as_FLUFL.compiler_flag
FUTURE_FLAGS = ~BARRY_AS_FLUFL & functools.reduce(
    int.__or__, (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names))
#: Words in a program's first part that keep it whole (see :func:`_precompile_parts`): it could
#: tell its code and its tail's from the whole file's through its builtins (a frame takes
#: ``__builtins__`` as it starts), a tracing, profiling or audit hook (the tail's code starts a
#: frame of its own, through one more ``exec``), or a frame of its own kept past its end.
_HEAD_WORDS = ("__builtins__", "settrace", "setprofile", "monitoring", "addaudithook",
               "_getframe", "currentframe")
#: Words in a shared tail that keep the program whole (see :func:`_shared_tail`): a
#: ``__future__`` import (an error within the whole file), a ``global`` declaration (within the
#: whole, one at module level is an error after a use of its name in the part before).
_TAIL_WORDS = ("__future__", "global")
#: Names whose use at a tail's top level keeps the program whole: what it would set from its
#: own start that within the whole file is set from the file's (a docstring: ``__doc__``;
#: module annotations: ``__annotations__``, from 3.14 ``__annotate__`` and
#: ``__conditional_annotations__``).
_WHOLE_FILE_NAMES = frozenset({"__doc__", "__annotations__", "__annotate__",
                               "__conditional_annotations__"})
#: The opcode that makes a module's annotations (None where a Python has none).
_SETUP_ANNOTATIONS = opcode.opmap.get("SETUP_ANNOTATIONS")
#: Shared tails whose code a worker keeps (see :func:`precompile`).
SHARED_TAILS_KEPT = 256
#: Where code objects are nested in a code object's constants: (index, their own nesting).
_Nesting = tuple[tuple[int, "_Nesting"], ...]


def precompile(source: str, path: str, tail_at: int | None = None) -> bytes | str | None:
    """Compile the Python program that will run as ``path`` as its child would (the caller
    checks that the warning filters are the child's: see ``ForkServer.compiles_here``): its
    code for :meth:`Forker.launch` (a tuple of code objects, marshalled, which the child runs in
    turn in one namespace); the error text of a syntax error (no child needed); None when the
    child must compile it: larger than :data:`PRECOMPILE_MAX`, more ``+`` than
    :data:`PRECOMPILE_MAX_PLUS`, naming one of :data:`WORDS_COMPILED_IN_THE_CHILD`, a
    ``match`` statement's clause (:data:`CASE_CLAUSE`), a coding declaration (whose codec
    could spell those words otherwise: ``+AGY-`` is ``f`` in UTF-7), a
    compiler warning (which must reach the program's stderr), nested too deep to compile (how
    deep may depend on the stack), no memory, or code too deeply nested to marshal.

    ``tail_at``: where the part of ``source`` that other programs share begins (a task's tests,
    after each of its candidates). Where each part compiles on its own as it would within the
    whole (:func:`_shared_tail`), the program's code is the two parts' code, the tail's
    compiled once for all the programs that share it. The two run as the whole file would,
    but that equal constants of the two parts are two objects, not one (``is`` may tell them
    apart); the tail's own module code starts at the tail's first line (its ``co_firstlineno``
    is not 1; its line numbers are the file's); and a head that reaches, without naming them
    (:data:`_HEAD_WORDS`), its builtins, a tracing or audit hook or a frame of its own kept
    past its end could tell that its frame ended before the tail's began (one that rebinds or
    removes ``__builtins__`` changes the tail's builtins: what it could do anyway to the
    builtins themselves, ``builtins.abs = ...``)."""
    if (len(source) > PRECOMPILE_MAX or source.count("+") > PRECOMPILE_MAX_PLUS
            or any(word in source for word in WORDS_COMPILED_IN_THE_CHILD)
            or _has_case_clause(source) or _declares_coding(source)):
        return None
    if tail_at is not None:
        parts = _precompile_parts(source, path, tail_at)
        if parts is not None:
            return parts
    try:
        with warnings.catch_warnings(record=True) as shown:  # (the filters as they are)
            code = compile(file_source(file_bytes(source)), path, "exec", dont_inherit=True)
    except (RecursionError, MemoryError):
        return None
    except COMPILE_ERRORS as exc:  # (after a warning, the child shows both)
        return None if shown else _error_text(exc, source, path)[-_TAIL:]
    if shown:
        return None
    return _marshalled((code,))


def _precompile_parts(source: str, path: str, at: int) -> bytes | None:
    """The code of ``source`` split at ``at`` (see :func:`precompile`); None where the split
    cannot stand in for the whole (the whole is then compiled): the tail does not start a line,
    the head names one of :data:`_HEAD_WORDS`, or its last line ends in a backslash (Python
    3.11 compiles a head that ends in ``\\`` and CRLF as if a blank line followed, where within
    the whole the backslash joins the tail's first line). (A coding declaration of the head's, which
    would apply to the tail, :func:`precompile` has already sent to the child.)"""
    head, tail = source[:at], source[at:]
    if not (head.endswith("\n") and tail) or head.rstrip("\r\n").endswith("\\"):  # (see below)
        return None
    names = _as_names(head)
    if any(word in names for word in _HEAD_WORDS):
        return None
    try:
        with warnings.catch_warnings(record=True) as shown:
            first = compile(file_source(file_bytes(head)), path, "exec", dont_inherit=True)
    except (*COMPILE_ERRORS, MemoryError):  # the whole's error is the one to show
        return None
    shared = _shared_tail(tail, path, first.co_flags & FUTURE_FLAGS)
    if shown or shared is None or first.co_flags & BARRY_AS_FLUFL:
        return None
    # the lines before the tail, as the compiler counts them ("\r\n", "\n" and a lone "\r")
    lines = head.count("\n") + head.count("\r") - head.count("\r\n")
    return _marshalled((first, _moved(*shared, lines)))


def _as_names(text: str) -> str:
    """``text`` with its names as python reads them (NFKC: ``__ｆuture__`` is ``__future__``), to
    look for words in."""
    if text.isascii():
        return text
    import unicodedata  # (here: see InProcess.compiles_here; ASCII text, most, needs none)

    return unicodedata.normalize("NFKC", text)


@functools.lru_cache(maxsize=SHARED_TAILS_KEPT)
def _shared_tail(tail: str, path: str,
                 future_flags: int) -> tuple[CodeType, _Nesting] | None:
    """The code of a program's shared tail, compiled on its own (from line 1) with the
    ``__future__`` features of the part before it; None where it would not act as within the
    whole file: it does not compile alone (indented, a clause of a statement before it, ...),
    warns, names one of :data:`_TAIL_WORDS`, has a coding declaration or a byte order mark
    (which would apply to it alone), module annotations (``SETUP_ANNOTATIONS``: within the
    whole, made as the file starts), uses a name of :data:`_WHOLE_FILE_NAMES`, or has a class
    whose first line is a constant of its code (``__firstlineno__``, from 3.13: it would not
    move with the code). With the code, where code objects are nested in it (:func:`_nesting`),
    for :func:`_moved`."""
    if (any(word in _as_names(tail) for word in _TAIL_WORDS) or tail.startswith("\ufeff")
            or _declares_coding(tail)):
        return None
    try:
        with warnings.catch_warnings(record=True) as shown:
            code = compile(file_source(file_bytes(tail)), path, "exec", flags=future_flags,
                           dont_inherit=True)
    except (*COMPILE_ERRORS, MemoryError):
        return None
    if (shown or _WHOLE_FILE_NAMES.intersection(code.co_names)
            or (_SETUP_ANNOTATIONS is not None and _SETUP_ANNOTATIONS in code.co_code[::2])
            or any("__firstlineno__" in nested.co_names for nested in _nested(code))):
        return None
    return code, _nesting(code)


def _nested(code: CodeType) -> Iterator[CodeType]:
    """``code`` and every code object nested in it."""
    yield code
    for value in code.co_consts:
        if isinstance(value, CodeType):
            yield from _nested(value)


def _has_case_clause(text: str) -> bool:
    """Whether a line of ``text`` (ended by ``\\n`` or ``\\r``) starts with the word
    :data:`CASE_CLAUSE` after spaces, tabs and form feeds: the regular expression
    ``(?:\\A|[\\n\\r])[ \\t\\f]*case\\b``, found ten times faster (most programs name
    "case" in words, and each search of the expression tried every line's start)."""
    word = len(CASE_CLAUSE)
    at = text.find(CASE_CLAUSE)
    while at >= 0:
        after = text[at + word:at + word + 1]
        if not (after.isalnum() or after == "_"):
            start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
            if not text[start:at].strip(" \t\f"):
                return True
        at = text.find(CASE_CLAUSE, at + word)
    return False


def _declares_coding(text: str) -> bool:
    """Whether ``text`` may declare its coding (PEP 263: a comment in its first two lines that
    names one; any "coding" there counts)."""
    second_end = text.find("\n", text.find("\n") + 1)
    return "coding" in (text if second_end < 0 else text[:second_end])


def _nesting(code: CodeType) -> _Nesting:
    """Where code objects are nested in ``code`` (found once for a shared tail: a task's tests
    hold many constants, and few of them are code)."""
    return tuple((index, _nesting(value)) for index, value in enumerate(code.co_consts)
                 if isinstance(value, CodeType))


def _moved(code: CodeType, nesting: _Nesting, lines: int) -> CodeType:
    """``code`` (and the code nested in it, where ``nesting`` says) placed ``lines`` lines
    further down its file (the location table is relative to the first line)."""
    if not nesting:
        return code.replace(co_firstlineno=code.co_firstlineno + lines)
    constants = list(code.co_consts)
    for index, inner in nesting:
        constants[index] = _moved(constants[index], inner, lines)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=tuple(constants))


def _marshalled(code: tuple[CodeType, ...]) -> bytes | None:
    try:
        return marshal.dumps(code)
    except ValueError:  # code nested too deeply to marshal (~1000 nested lambdas)
        return None
