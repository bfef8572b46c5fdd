"""Each outcome in each language, the token rule, the cache, and pass@k against hand values."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from hybridmetric.sandbox import (
    CRASH,
    FAILED,
    MEMORY,
    PASSED,
    SANDBOX_ERROR,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
    Sandbox,
    compiling,
    isolation,
    pass_at_k,
    pool,
)
from hybridmetric.sandbox.cache import ResultCache, cache_key
from hybridmetric.sandbox.languages import (
    _java_unescaped,
    java_binary_name,
    java_code,
    java_main_class,
    java_public_type,
    uses_stdcxx,
)

Run = Callable[..., RunResult]

PROGRAMS = {
    "python": {
        PASSED: "def add(a, b):\n    return a + b\nassert add(2, 3) == 5\n",
        FAILED: "def add(a, b):\n    return a - b\nassert add(2, 3) == 5\n",
        SYNTAX_ERROR: "def add(a, b)\n    return a + b\n",
        TIMEOUT: "while True:\n    pass\n",
        MEMORY: "x = bytearray(8 * 1024**3)\n",
        CRASH: "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    },
    "javascript": {
        PASSED: "const assert = require('node:assert');\nconst add = (a, b) => a + b;\n"
                "assert.deepEqual(add(2, 3), 5);\n",
        FAILED: "const assert = require('node:assert');\nconst add = (a, b) => a - b;\n"
                "assert.deepEqual(add(2, 3), 5);\n",
        SYNTAX_ERROR: "const add = (a, b) => { return a + b;\n",
        TIMEOUT: "for (;;) {}\n",
        MEMORY: "const a = [];\nwhile (true) a.push(Buffer.alloc(1 << 28));\n",
        CRASH: "process.kill(process.pid, 'SIGSEGV');\n",
    },
    "cpp": {
        PASSED: "#include <assert.h>\nint add(int a, int b) { return a + b; }\n"
                "int main() { auto candidate = add; assert(candidate(2, 3) == 5); }\n",
        FAILED: "#include <assert.h>\nint add(int a, int b) { return a - b; }\n"
                "int main() { auto candidate = add; assert(candidate(2, 3) == 5); }\n",
        SYNTAX_ERROR: "int add(int a, int b) { return a + b }\nint main() {}\n",
        TIMEOUT: "int main() { volatile int x = 0; while (true) x++; }\n",
        MEMORY: "#include <cstring>\nint main() { while (true) { char *p = new char[1 << 26]; "
                "std::memset(p, 1, 1 << 26); } }\n",
        CRASH: "int main() { volatile int *p = nullptr; return *p; }\n",
    },
    "java": {
        PASSED: "class Problem {\n  static int add(int a, int b) { return a + b; }\n"
                "  public static void main(String[] args) { assert(add(2, 3) == 5); }\n}\n",
        FAILED: "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
                "  public static void main(String[] args) { assert(add(2, 3) == 5); }\n}\n",
        SYNTAX_ERROR: "class Problem {\n  public static void main(String[] args) { int x = }\n}\n",
        TIMEOUT: "class Problem {\n  public static void main(String[] args) {\n"
                 "    while (true) {}\n  }\n}\n",
        MEMORY: "import java.util.*;\nclass Problem {\n  public static void main(String[] a) {\n"
                "    List<long[]> l = new ArrayList<>();\n"
                "    while (true) l.add(new long[1 << 24]);\n  }\n}\n",
        # a write to address 0: the JVM reports its fatal error and aborts
        CRASH: "class Problem {\n  public static void main(String[] a) throws Exception {\n"
               "    java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("
               "\"theUnsafe\");\n    f.setAccessible(true);\n"
               "    ((sun.misc.Unsafe) f.get(null)).putAddress(0, 0);\n  }\n}\n",
    },
}
CASES = [(lang, outcome) for lang, table in PROGRAMS.items() for outcome in table]
LIMITS = Limits(timeout_s=3.0, memory_mb=512)
#: For programs whose verdict is no timeout: they end of themselves, but may take seconds to
#: (one that fills its memory page by page, on a loaded machine).
ROOMY = Limits(timeout_s=20.0, memory_mb=512)


def test_every_outcome_in_every_language(sandbox: Sandbox) -> None:
    """One batch across both workers: every (language, outcome) program gets that outcome."""
    programs = [Program(lang, PROGRAMS[lang][outcome], LIMITS if outcome == TIMEOUT else ROOMY)
                for lang, outcome in CASES]
    results = sandbox.run(programs)
    got = {case: result.outcome for case, result in zip(CASES, results, strict=True)}
    assert got == {case: case[1] for case in CASES}, [
        (case, r.error[-300:]) for case, r in zip(CASES, results, strict=True)
        if r.outcome != case[1]]


#: Programs whose stderr carries a runtime's words for running out of memory, or that abort,
#: and what they are: a failing assertion that quotes the words fails; an exception nothing
#: caught fails (C++ aborts on it; Java and node exit with 1).
WORDS_ARE_NOT_VERDICTS = [
    ("cpp", '#include <cassert>\n#include <string>\nint main() {\n'
            '  assert(std::string("std::bad_alloc") == "x");\n}\n', FAILED),
    ("cpp", '#include <cstdio>\n#include <cstdlib>\nint main() {\n'
            '  std::fputs("terminate called after throwing an instance of \'std::bad_alloc\'\\n",'
            ' stderr);\n  return 1;\n}\n', FAILED),
    # ... printed whole, then an assertion that fails after them (libstdc++ aborts as it
    # wrote its own)
    ("cpp", '#include <cassert>\n#include <cstdio>\nint main() {\n'
            '  std::fputs("terminate called after throwing an instance of \'std::bad_alloc\'\\n",'
            ' stderr);\n  assert(1 == 2);\n}\n', FAILED),
    ("cpp", "#include <vector>\nint main() { std::vector<int> v(3); return v.at(5); }\n", FAILED),
    ("cpp", "int main() { throw 1; }\n", FAILED),
    ("cpp", "#include <cstdlib>\nint main() { std::abort(); }\n", CRASH),
    ("java", 'class Problem {\n  public static void main(String[] a) {\n'
             '    String r = "Cannot allocate memory";\n    assert r.equals("x") : r;\n  }\n}\n',
     FAILED),
    ("java", 'class Problem {\n  public static void main(String[] a) {\n'
             '    assert false : "OutOfMemoryError\\n"\n'
             '        + "java.lang.OutOfMemoryError: Java heap space";\n'
             "  }\n}\n", FAILED),
    # the process limit: the JVM calls it an OutOfMemoryError ("unable to create native thread")
    ("java", "class Problem {\n  public static void main(String[] a) {\n    while (true) {\n"
             "      Thread t = new Thread(() -> { try { Thread.sleep(60000); } "
             "catch (InterruptedException e) {} });\n"
             "      t.setDaemon(true);\n      t.start();\n    }\n  }\n}\n", FAILED),
    # the runtime's report after the program's own output on the same line
    ("cpp", "#include <iostream>\n#include <vector>\nint main() {\n  std::cerr << \"x\";\n"
            "  std::vector<char> v;\n  while (true) v.resize(v.size() * 2 + 1024);\n}\n", MEMORY),
    ("cpp", "#include <iostream>\n#include <stdexcept>\nint main() {\n  std::cerr << \"x\";\n"
            "  throw std::runtime_error(\"boom\");\n}\n", FAILED),
    ("java", "class Problem {\n  public static void main(String[] a) {\n"
             "    System.err.print(\"x\");\n    long[][] b = new long[1000][];\n"
             "    for (int i = 0; ; i++) b[i % 1000] = new long[1 << 24];\n  }\n}\n", MEMORY),
    # the linker's words are the build's room; the program's own #error is a syntax error
    ("cpp", "#error No space left on device\nint main() {}\n", SYNTAX_ERROR),
    # a syntax error in a file the program writes and requires: the program's failure
    ("javascript", "require('fs').writeFileSync('helper.js', 'const a = ;');\n"
                   "require('./helper.js');\n", FAILED),
    ("javascript", "const assert = require('node:assert');\n"
                   "assert.deepStrictEqual(['MemoryError', 'Allocation failed', "
                   "'JavaScript heap out of memory', 'std::bad_alloc'], []);\n", FAILED),
    # a runtime's words on a line of their own, printed by the program, which then exits: the
    # runtime neither aborted nor reported (node's fatal error aborts; the JVM's start-up
    # failure comes before its harness runs)
    ("javascript", "console.error('FATAL ERROR: Reached heap limit Allocation failed - "
                   "JavaScript heap out of memory');\nprocess.exit(1);\n", FAILED),
    ("javascript", "console.error('RangeError: Array buffer allocation failed');\n"
                   "process.exit(1);\n", FAILED),
    ("java", 'class Problem {\n  public static void main(String[] a) {\n'
             '    System.err.println("Exception in thread \\"main\\" '
             'java.lang.OutOfMemoryError: Java heap space");\n'
             '    System.err.println("Could not reserve enough space for object heap");\n'
             '    System.err.println("# There is insufficient memory for the Java Runtime '
             'Environment to continue.");\n    System.exit(1);\n  }\n}\n', FAILED),
    # ... nor after it emptied its report pipe, or refilled fd 3 (knowing no secret to put there)
    ("java", 'class Problem {\n  public static void main(String[] a) throws Exception {\n'
             '    java.io.FileInputStream in = new java.io.FileInputStream("/proc/self/fd/4");\n'
             '    int k = in.available();\n    if (k > 0) in.read(new byte[k]);\n'
             '    try (java.io.FileOutputStream o = new java.io.FileOutputStream('
             '"/proc/self/fd/3")) {\n      o.write(new byte[32]);\n    }\n'
             '    System.err.println("Could not reserve enough space for object heap");\n'
             '    System.exit(1);\n  }\n}\n', FAILED),
    # a report that its language's harness never makes, sent with the key read back from fd 4
    ("java", "class Problem {\n  public static void main(String[] a) throws Exception {\n"
             "    Thread t = new Thread(() -> {\n      try {\n        Thread.sleep(500);\n"
             "        byte[] b = new byte[64];\n        int n;\n"
             "        try (java.io.FileInputStream in = new java.io.FileInputStream("
             "\"/proc/self/fd/4\")) {\n          n = in.read(b);\n        }\n"
             "        int m = 0;\n        while (b[m] != 'M') m++;\n        b[m] = 'S';\n"
             "        try (java.io.FileOutputStream o = new java.io.FileOutputStream("
             "\"/proc/self/fd/4\")) {\n          o.write(b, m, n - m);\n        }\n"
             "      } catch (Exception e) {\n        throw new RuntimeException(e);\n      }\n"
             "    });\n    t.start();\n    throw new OutOfMemoryError(\"Java heap space\");\n"
             "  }\n}\n", FAILED),
    # node's ArrayBuffer it could not allocate, nothing caught: its harness says so; as it does
    # a WebAssembly memory V8 could not grow or make, and a worker thread's heap exhausted
    ("javascript", "const keep = [];\nwhile (true) keep.push(new ArrayBuffer(2 ** 30));\n",
     MEMORY),
    ("javascript", "const memory = new WebAssembly.Memory({initial: 1, maximum: 65536});\n"
                   "const keep = [];\nwhile (true) {\n  memory.grow(1000);\n"
                   "  keep.push(new Uint8Array(memory.buffer).fill(1, -1));\n}\n", MEMORY),
    ("javascript", "new WebAssembly.Memory({initial: 60000});\n", MEMORY),
    ("javascript", "const {Worker} = require('worker_threads');\n"
                   "new Worker('const a = []; while (true) a.push(new Array(1e6).fill(1.5));',"
                   " {eval: true});\n", MEMORY),
    # ... but not the same words in an error of the program's own
    ("javascript", "throw new RangeError('WebAssembly.Memory.grow(): Unable to grow instance "
                   "memory!');\n", FAILED),
    # another thread's OutOfMemoryError, after which the tests fail
    ("java", "class Problem {\n  public static void main(String[] a) throws Exception {\n"
             "    Thread t = new Thread(() -> {\n      long[][] b = new long[1000][];\n"
             "      for (int i = 0; ; i++) b[i % 1000] = new long[1 << 24];\n    });\n"
             "    t.start();\n    t.join();\n    assert false;\n  }\n}\n", MEMORY),
    # an OutOfMemoryError out of a static initializer (no InvocationTargetException around it)
    ("java", "class Problem {\n  static long[][] b = new long[1000][];\n"
             "  static { for (int i = 0; i >= 0; i++) b[i % 1000] = new long[1 << 24]; }\n"
             "  public static void main(String[] a) {}\n}\n", MEMORY),
]


@pytest.mark.parametrize(("language", "source", "outcome"), WORDS_ARE_NOT_VERDICTS,
                         ids=[f"{lang}-{i}" for i, (lang, _, _) in
                              enumerate(WORDS_ARE_NOT_VERDICTS)])
def test_a_runtime_s_words_in_a_failure_make_no_other_verdict(
        sandbox: Sandbox, run: Run, language: str, source: str, outcome: str) -> None:
    """A program that runs out of memory is ``memory`` because its runtime says so (or the
    memory cgroup's OOM killer acts); the same words inside an assertion's message are a
    failure."""
    result = run(sandbox, language, source, ROOMY)
    assert result.outcome == outcome, result


def test_a_heap_too_small_for_node_to_start_is_memory(sandbox: Sandbox, run: Run) -> None:
    """node whose heap limit cannot hold its own start-up aborts with V8's "Fatal javascript
    OOM" (not the words of a heap the program filled): the program's memory."""
    result = run(sandbox, "javascript", "console.log(1);\n", Limits(timeout_s=20.0, memory_mb=1))
    assert result.outcome == MEMORY, result


def test_error_text_is_the_same_in_any_worker(sandbox: Sandbox) -> None:
    """Each worker's folders have random names; the error text names none of them, so the same
    program gets the same text from any worker, run or machine."""
    programs = [Program(lang, PROGRAMS[lang][outcome], LIMITS) for lang in PROGRAMS
                for outcome in (FAILED, SYNTAX_ERROR)]
    with Sandbox(workers=1) as other:
        theirs = other.run(programs)
    ours = sandbox.run(programs)
    for program, mine, yours in zip(programs, ours, theirs, strict=True):
        assert mine.error == yours.error, (program.language, mine.error, yours.error)
        assert "hybridmetric-sandbox-" not in mine.error, mine.error
        assert "program." in mine.error or "Program.java" in mine.error, mine.error


def test_a_long_error_text_is_cut_where_it_names_no_folder(sandbox: Sandbox) -> None:
    """A traceback longer than the text kept is cut to its head and tail after the worker's
    folders are taken out of it: wherever the cut falls, no part of a folder's name is left,
    and the text is the same in any worker (frames whose lines are mostly the file's path, with
    names of eight lengths, so that the cuts fall at eight places across them)."""
    def program(f: str, g: str) -> str:  # (two functions in turn: no frame repeats the last)
        return (f"def {f}(n):\n    return {g}(n - 1) if n else 1 / 0\n\n"
                f"def {g}(n):\n    return {f}(n - 1)\n\n{f}(60)\n")

    programs = [Program("python", program("f" * size, "g" * size), LIMITS)
                for size in range(1, 9)]
    with Sandbox(workers=1) as other:
        theirs = other.run(programs)
    for mine, yours in zip(sandbox.run(programs), theirs, strict=True):
        assert mine.outcome == FAILED and "chars cut]" in mine.error, mine
        assert "/tmp" not in mine.error and "sandbox-" not in mine.error, mine.error
        assert mine.error == yours.error


def test_error_text_escapes_what_utf8_cannot_hold_as_python_s_stderr_does(
        sandbox: Sandbox, run: Run) -> None:
    result = run(sandbox, "python", "raise ValueError('\\udcff bad')\n", LIMITS)
    assert result.outcome == FAILED and result.error.endswith("ValueError: \\udcff bad\n"), result


def test_failure_keeps_capped_error_text(sandbox: Sandbox, run: Run) -> None:
    source = "import sys\nsys.stderr.write('noise\\n' * 100000)\nraise ValueError('boom')\n"
    result = run(sandbox, "python", source, LIMITS)
    assert result.outcome == FAILED
    assert "ValueError: boom" in result.error and len(result.error) < 2500


def test_an_exit_whose_code_cannot_be_shown_is_a_failure(sandbox: Sandbox, run: Run) -> None:
    """The exit code is the program's object: its failing ``repr`` is the program's fault."""
    source = "class C:\n    def __repr__(self):\n        raise ValueError\nraise SystemExit(C())\n"
    result = run(sandbox, "python", source, LIMITS)
    assert result.outcome == FAILED and "exit(<unprintable>)" in result.error, result


@pytest.mark.parametrize("ending", ["assert 1 == 2\n", "raise SystemExit(3)\n"])
def test_an_unended_line_on_stderr_shows_before_the_error_as_in_python(
        sandbox: Sandbox, run: Run, ending: str, tmp_path: Path) -> None:
    """What a failing program wrote to ``sys.stderr`` without ending the line is still in its
    buffer when it fails: python prints its traceback through the same stream, after it (the
    sandbox words an exit otherwise, but after the same line; it shows no column markers)."""
    source = f"import sys\nsys.stderr.write('left')\nprint('out', end='')\n{ending}"
    (tmp_path / "program.py").write_text(source)
    python = subprocess.run([sys.executable, "-X", "no_debug_ranges", "program.py"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    result = run(sandbox, "python", source, LIMITS)
    assert result.outcome == FAILED
    assert python.stderr.startswith("left") and result.error.startswith("left"), result.error
    if "assert" in ending:
        assert result.error == python.stderr.replace(str(tmp_path / "program.py"), "program.py")


@pytest.mark.parametrize("break_", ["\\x0c", "\\x1c", "\\u2028"])
def test_traceback_quotes_the_lines_that_ran(sandbox: Sandbox, run: Run, break_: str) -> None:
    """Traceback lines come from the source that ran, split where the compiler splits it (a form
    feed or a Unicode line separator inside a string is no line break), even when the program
    emptied its own file."""
    source = (f"text = 'a{break_}b'\nopen(__file__, 'w').write('')\n"
              f"assert len(text) == 0, 'third'\n")
    source = source.encode().decode("unicode_escape")  # the break character itself
    result = run(sandbox, "python", source, LIMITS)
    assert result.outcome == FAILED
    assert "    assert len(text) == 0, 'third'" in result.error.split("\n"), result.error


def test_timeout_is_wall_clock_not_cpu(sandbox: Sandbox, run: Run) -> None:
    assert run(sandbox, "python", "import time\ntime.sleep(30)\n",
               Limits(timeout_s=1.0)).outcome == TIMEOUT


def test_program_sees_clean_environment_and_private_dir(sandbox: Sandbox, run: Run) -> None:
    source = (
        "import os, tempfile\n"
        "assert sorted(os.environ) == ['HOME', 'LANG', 'PATH', 'PYTHONDONTWRITEBYTECODE'], "
        "sorted(os.environ)\n"
        "assert os.listdir('.') == ['program.py'], os.listdir('.')\n"
        "assert os.environ['HOME'] == os.getcwd() and tempfile.gettempdir() == '/tmp'\n"
        "assert os.getuid() != 0 and os.getgid() != 0\n"
        "assert os.getsid(0) == os.getpid()\n"
        "open('scratch.txt', 'w').write('mine')\n"
    )
    assert run(sandbox, "python", source, LIMITS).outcome == PASSED


def test_program_imports_what_it_writes_beside_itself(sandbox: Sandbox, run: Run) -> None:
    """Its folder is first on the import path, even though the fork server started before any
    such folder existed (an import system that had looked for it then would skip it now)."""
    source = ("import os\nopen('helper_mod.py', 'w').write('VALUE = 41')\n"
              "import helper_mod\nassert helper_mod.VALUE + 1 == 42\n"
              "assert not os.path.exists('__pycache__')  # no bytecode written\n")
    assert run(sandbox, "python", source, LIMITS).outcome == PASSED


def test_programs_have_the_interpreter_site_gives(sandbox: Sandbox, run: Run) -> None:
    """The builtins ``site`` adds (``help``, ``exit``, ``quit``) are there: generated programs
    call ``help(f)``, and MultiPL-E recorded those as passing."""
    source = ("import sys\nassert callable(help) and callable(exit) and callable(quit)\n"
              "assert sys.dont_write_bytecode\n")
    assert run(sandbox, "python", source, LIMITS).outcome == PASSED


def test_programs_fork_from_a_small_server_as_root(sandbox: Sandbox, run: Run) -> None:
    """As root, programs are forked by the fork server, which holds the standard modules
    programs import most and none of the worker's own (its JSON, dataclasses, verdicts); its
    own module (and the bare packages that found it) are out of ``sys.modules``, so a program
    that imports ``hybridmetric`` gets what ``python`` would give it."""
    source = ("import sys\nassert {'typing', 'math', 'collections', 're'} <= set(sys.modules)\n"
              "assert not {'json', 'dataclasses', 'hybridmetric', 'hybridmetric.sandbox', "
              "'hybridmetric.sandbox.worker', 'hybridmetric.sandbox.launcher', "
              "'hybridmetric.sandbox.compiling', 'hybridmetric.sandbox._forkloop'} & "
              "set(sys.modules), sorted(sys.modules)\n")
    assert run(sandbox, "python", source, LIMITS).outcome == PASSED


def test_what_a_program_leaves_never_reaches_the_next(run: Run) -> None:
    """Files in its folder (its own file swapped for a folder), and in /tmp, /var/tmp and
    /dev/shm, are gone before the next program; so is what it made and removed itself. (The
    worker checks the private folders with one lstat each: their size counts their entries.)"""
    with Sandbox(workers=1) as box:  # one worker: the programs meet the same folders
        if not box.isolation.mount_namespace or box.isolation.uid is None:
            pytest.skip("the private tmpfs folders are made as root")
        listing = ("import os, sys\nprint(sorted(os.listdir('/tmp')), sorted(os.listdir("
                   "'/var/tmp')), sorted(os.listdir('/dev/shm')), file=sys.stderr)\n"
                   "assert False\n")
        before = run(box, "python", listing, LIMITS).error.splitlines()[0]
        litter = ("import os\nos.mkdir('sub')\nopen('sub/x', 'w').write('x')\n"
                  "os.remove('program.py')\nos.mkdir('program.py')\n"
                  "for top in ('/tmp', '/var/tmp', '/dev/shm'):\n"
                  "    open(f'{top}/left', 'w').write('x')\n"
                  "    open(f'{top}/gone', 'w').write('x')\n"
                  "    os.remove(f'{top}/gone')\n")
        assert run(box, "python", litter, LIMITS).outcome == PASSED
        assert run(box, "python", listing + "# again\n", LIMITS).error.splitlines()[0] == before
        clean = "import os\nassert os.listdir('.') == ['program.py'], os.listdir('.')\n"
        assert run(box, "python", clean, LIMITS).outcome == PASSED


def test_size_of_a_tmpfs_folder_counts_its_entries(tmp_path: Path) -> None:
    """The private folders are tmpfs mounts, whose size grows with each entry: the probe says so
    there. (On another file system it may say either; the worker then lists the folder.)"""
    with open("/proc/self/mounts") as handle:
        kinds = {fields[1]: fields[2] for fields in map(str.split, handle)}
    if kinds.get("/dev/shm") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    assert isolation._size_counts_entries("/dev/shm")
    assert not [name for name in os.listdir("/dev/shm") if name.startswith(".hybridmetric-probe")]


def test_compiled_before_the_fork_as_if_in_the_child(run: Run) -> None:
    """The worker compiles a program and its child loads the code: a syntax error needs no
    child (the next program gets the next PID of the worker's namespace), a compiler warning
    still reaches the program's stderr, what the worker saw of a broken program never reaches
    the next one's ``linecache``, and a program too large to compile there is compiled in its
    child. An expression nested too deep to compile is a syntax error either way."""
    pid = "import os\nassert False, os.getpid()\n"
    with Sandbox(workers=1) as box:
        first = int(run(box, "python", pid, LIMITS).error.split()[-1])
        broken = run(box, "python", "x = 1\ndef f(:\n    pass\n", LIMITS)
        assert broken.outcome == SYNTAX_ERROR and "line 2" in broken.error, broken
        then = int(run(box, "python", pid + "# again\n", LIMITS).error.split()[-1])
        assert then == first + (1 if compiling.PRECOMPILE_MAX > 0 else 2)
        source = ("import linecache\nassert linecache.getlines(__file__)[0] == "
                  "'import linecache\\n', linecache.getlines(__file__)[:1]\n")
        assert run(box, "python", source, LIMITS).outcome == PASSED
        warned = run(box, "python", "x = 1\nassert x is 2\n", LIMITS)
        assert warned.outcome == FAILED and "SyntaxWarning" in warned.error, warned
        filler = "# filler\n" * (compiling.PRECOMPILE_MAX // 9 + 1)
        assert run(box, "python", filler + "def f(:\n", LIMITS).outcome == SYNTAX_ERROR
        assert run(box, "python", filler + "assert True\n", LIMITS).outcome == PASSED
        for deep in ("x = " + "1+" * 20_000 + "1\n", filler + "x = " + "1+" * 20_000 + "1\n"):
            nested = run(box, "python", deep, LIMITS)
            assert nested.outcome == SYNTAX_ERROR and "RecursionError" in nested.error, nested
        both = run(box, "python", "x = 1\nassert x is 2\nbreak\n", LIMITS)  # warning, then error
        assert both.outcome == SYNTAX_ERROR and "SyntaxWarning" in both.error, both
        assert "'break' outside loop" in both.error, both
        lambdas = "f = " + "lambda: " * 1000 + "0\nassert f\n"  # compiles; too deep to marshal
        assert run(box, "python", lambdas, LIMITS).outcome == PASSED


def test_what_a_program_compiles_never_shows_in_the_next(sandbox: Sandbox, run: Run) -> None:
    """Compiling a ``\\N{...}`` literal imports ``unicodedata``; programs are compiled where no
    later program can see that (the worker, or their own child)."""
    probe = "import sys\nassert False, ('unicodedata' in sys.modules, len(sys.modules))\n"
    before = run(sandbox, "python", probe, LIMITS).error.splitlines()[-1]
    assert "(False, " in before, before
    named = run(sandbox, "python", "assert '\\N{BULLET}' == '\\u2022'\n", LIMITS)
    assert named.outcome == PASSED, named
    assert run(sandbox, "python", probe + "# again\n", LIMITS).error.splitlines()[-1] == before


def test_tracebacks_carry_no_column_markers(sandbox: Sandbox, run: Run) -> None:
    """Programs run with ``-X no_debug_ranges``: a traceback quotes each line without the
    ``^^^``/``~~~`` markers, whose computation (parsing each quoted line again) cost a failing
    program about 0.2 ms."""
    result = run(sandbox, "python", "values = [1, 2]\nprint(values[0] + values[5])\n", LIMITS)
    assert result.outcome == FAILED and "IndexError" in result.error
    assert "    print(values[0] + values[5])" in result.error.splitlines()
    assert not [line for line in result.error.splitlines()
                if line.strip() and set(line.strip()) <= {"^", "~"}], result.error


@pytest.mark.parametrize("pin", [True, False])
def test_each_worker_keeps_its_programs_on_one_cpu(run: Run, pin: bool) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    source = ("import os, time\ntime.sleep(0.02)\n"
              "assert False, sorted(os.sched_getaffinity(0))\n")
    with Sandbox(workers=2, pin_cpus=pin) as box:
        results = box.run([Program("python", source + f"# {i}\n", LIMITS) for i in range(12)])
    seen = {result.error.strip().splitlines()[-1] for result in results}
    if pin:
        assert seen == {f"AssertionError: [{cpu}]" for cpu in allowed[:2]}, seen
    else:
        assert seen == {f"AssertionError: {allowed}"}, seen


def test_identical_programs_run_once_and_cache_persists(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    real_run = pool._Worker.run

    def counting_run(self: pool._Worker, programs: list[Program],
                     classpath: list[str]) -> Iterator[RunResult]:
        sent.extend(program.source for program in programs)
        return real_run(self, programs, classpath)

    monkeypatch.setattr(pool._Worker, "run", counting_run)
    path = tmp_path / "verdicts.sqlite"
    passing = Program("python", "assert 1 + 1 == 2\n", LIMITS)
    programs = [passing, passing, passing, Program("py", "assert 0\n", LIMITS)]
    with Sandbox(workers=2, cache=path) as box:
        first = box.run(programs)
    assert [r.outcome for r in first] == [PASSED, PASSED, PASSED, FAILED]
    assert sorted(sent) == ["assert 0\n", "assert 1 + 1 == 2\n"]  # identical ones ran once
    with Sandbox(workers=1, cache=path) as box:
        assert box.run(programs) == first
        slower = box.run([Program("python", "assert 0\n", Limits(timeout_s=4.0))])
    assert slower[0].outcome == FAILED
    assert len(sent) == 3  # only the program with new limits ran; the rest came from the cache
    cache = ResultCache(path)
    assert len(cache) == 3
    cache.close()


def test_an_interrupted_run_keeps_what_finished_in_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.sqlite"
    programs = [Program("python", f"assert {i} >= 0\n", LIMITS) for i in range(3 * pool.SAVE_EVERY)]

    main = threading.main_thread().ident
    assert main is not None

    def interrupt(done: int) -> None:  # Ctrl-C: SIGINT, handled by the main thread
        if done == pool.SAVE_EVERY + 3:
            signal.pthread_kill(main, signal.SIGINT)

    # Python's own handler, even where the test runner was started with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Sandbox(workers=1, cache=path) as box, pytest.raises(KeyboardInterrupt):
            box.run(programs, progress=interrupt)
    finally:
        signal.signal(signal.SIGINT, previous)
    cache = ResultCache(path)
    # the batch saved on the way, the rest at the stop, and the program then in flight
    assert pool.SAVE_EVERY + 3 <= len(cache) <= pool.SAVE_EVERY + 4
    cache.close()


def test_ctrl_c_stops_the_programs_still_running(tmp_path: Path) -> None:
    """Ctrl-C while programs sleep: the run ends at once (not when their 300 s run out), they
    are gone, none gets a verdict in the cache, and the sandbox runs the next program."""
    if os.getuid() != 0:
        pytest.skip("the programs' own uids need root")
    main = threading.main_thread().ident
    assert main is not None
    sleeper = Program("python", "import time\ntime.sleep(300)\n", Limits(timeout_s=300))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Sandbox(workers=2, cache=tmp_path / "v.sqlite") as box:
            uids = set(box.uids)

            def interrupt() -> None:  # once both workers run a sleeper
                for _ in range(3000):
                    if len(_of_uids(uids)) >= 2:
                        break
                    time.sleep(0.01)
                signal.pthread_kill(main, signal.SIGINT)

            threading.Thread(target=interrupt, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                box.run([sleeper, replace(sleeper, source=sleeper.source + "# 2\n"),
                         replace(sleeper, source=sleeper.source + "# 3\n")])
            for _ in range(1000):  # killed with their worker's PID namespace, as it ends
                if not _of_uids(uids):
                    break
                time.sleep(0.01)
            assert _of_uids(uids) == []
            assert len(box.cache) == 0
            [after] = box.run([Program("python", "assert 2 + 2 == 4\n", LIMITS)])
            assert after.outcome == PASSED
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_worker_that_gives_no_verdict_in_time_is_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's safety net (``pool.answer_deadline``, here 1 s, not twice the limits and
    600 s more): a worker that gives no verdict by then is killed with its program (which
    would sleep for 300 s), the program gets an uncached sandbox_error that says so, and a
    fresh worker runs the next program."""
    if os.getuid() != 0:
        pytest.skip("the programs' own uids need root")
    monkeypatch.setattr(pool, "answer_deadline", lambda limits: 1.0)
    sleeper = Program("python", "import time\ntime.sleep(300)\n", Limits(timeout_s=300))
    with Sandbox(workers=1, cache=tmp_path / "v.sqlite") as box:
        uids = set(box.uids)
        started = time.monotonic()
        [late] = box.run([sleeper])
        waited = time.monotonic() - started
        assert late.outcome == SANDBOX_ERROR
        assert "gave no verdict within 1 s" in late.error and "replaced" in late.error
        assert waited < 100  # not the program's 300 s
        assert len(box.cache) == 0
        for _ in range(1000):  # killed with its worker's PID namespace, as it ends
            if not _of_uids(uids):
                break
            time.sleep(0.01)
        assert _of_uids(uids) == []
        [after] = box.run([Program("python", "assert 2 + 2 == 4\n", LIMITS)])
        assert after.outcome == PASSED


def test_limits_take_their_fields_types_or_are_refused(sandbox: Sandbox) -> None:
    """A whole number of MiB written as a float (or a numpy integer) is that number: the same
    limits, cache key and verdict; a fraction of one, a bool or no positive number is refused
    where the limits are made (not a sandbox_error in every program)."""
    import numpy as np

    written = Limits(timeout_s=3, memory_mb=512.0, open_files=np.int64(256), file_mb=64.0)
    assert written == LIMITS and type(written.memory_mb) is int and type(written.timeout_s) is float
    assert cache_key("python", "x", written, False) == cache_key("python", "x", LIMITS, False)
    [result] = sandbox.run([Program("python", "assert 1 + 1 == 2\n", written)])
    assert result.outcome == PASSED
    for bad, said in ((dict(memory_mb=64.7), "limit 'memory_mb' must be a whole number"),
                      (dict(processes=True), "limit 'processes' must be a positive number"),
                      (dict(timeout_s=math.inf), "limit 'timeout_s' must be a positive number"),
                      (dict(timeout_s=86400.5), "limit 'timeout_s' must be at most 86400 s"),
                      (dict(file_mb=0), "limit 'file_mb' must be a positive number")):
        with pytest.raises(ValueError, match=said):
            Limits(**bad)


def test_cache_key_depends_on_program_limits_language_network() -> None:
    base = cache_key("python", "x", LIMITS, False)
    assert base == cache_key("python", "x", Limits(timeout_s=3.0, memory_mb=512), False)
    others = {cache_key("python", "y", LIMITS, False), cache_key("cpp", "x", LIMITS, False),
              cache_key("python", "x", Limits(timeout_s=4.0, memory_mb=512), False),
              cache_key("python", "x", LIMITS, True)}
    assert base not in others and len(others) == 4


def test_a_new_interpreter_or_compiler_runs_the_programs_again(sandbox: Sandbox) -> None:
    """The runtime and its version are in the cache key (checked against each tool's own
    report of its version)."""
    key = cache_key("python", "x", LIMITS, False, runtime="python 3.11.7")
    assert key != cache_key("python", "x", LIMITS, False, runtime="python 3.12.0")
    assert sandbox.runtime("python") == f"python {sys.version} preload="
    for language, command in (("cpp", ["g++", "-dumpfullversion"]),
                              ("javascript", ["node", "-p", "process.versions.node"]),
                              ("java", ["javac", "-version"])):
        version = subprocess.run(command, capture_output=True, text=True,
                                 check=True).stdout.split()[-1]
        assert version in sandbox.runtime(language), (language, version)


def test_a_python_program_is_its_own_main_module(sandbox: Sandbox, run: Run) -> None:
    """As under ``python program.py``: pickle, unittest and typing find the program as
    ``sys.modules["__main__"]`` (with a dict for a namespace they found the fork server)."""
    module = ("import pickle, sys, typing\nclass Node:\n    nxt: 'Node'\n"
              "assert sys.modules['__main__'].Node is Node and __doc__ is None\n"
              "assert pickle.loads(pickle.dumps(Node())).__class__ is Node\n"
              "assert typing.get_type_hints(Node) == {'nxt': Node}\n")
    assert run(sandbox, "python", module).outcome == PASSED
    failing_unittest = ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n"
                        "        self.assertEqual(1, 2)\n"
                        "assert unittest.main(exit=False).result.wasSuccessful()\n")
    assert run(sandbox, "python", failing_unittest).outcome == FAILED


def test_unittest_main_s_exit_is_no_pass_and_the_error_says_what_to_call(sandbox: Sandbox,
                                                                          run: Run) -> None:
    tests = ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n"
             "        self.assertEqual(1, 1)\n")
    exits = run(sandbox, "python", tests + "unittest.main()\n")
    assert exits.outcome == FAILED
    # (exit(False) before Python 3.12, exit(0) since)
    assert re.search(r"called exit\((?:False|0)\): only a program that runs to its end passes "
                     r"\(an exit is a failure, even after its last assert\) \(unittest\.main\(\) "
                     "exits", exits.error), exits.error
    advised = run(sandbox, "python",
                  tests + "assert unittest.main(exit=False).result.wasSuccessful()\n")
    assert advised.outcome == PASSED
    plain = run(sandbox, "python", "import sys\nsys.exit(0)\n")
    assert plain.outcome == FAILED and "unittest" not in plain.error


def test_what_python_itself_accepts_runs(sandbox: Sandbox, run: Run) -> None:
    assert run(sandbox, "python", "\ufeffassert 1 == 1\n").outcome == PASSED  # a byte order mark
    # a failing assertion that quotes "MemoryError" is a failure, not memory
    quoted = "def f():\n    return 'MemoryError'\nassert f() == 'ok', f()\n"
    assert run(sandbox, "python", quoted).outcome == FAILED


def test_a_cpp_main_keeps_its_meaning(sandbox: Sandbox, run: Run) -> None:
    """``main``'s status counts, falling off its end is 0, and every signature g++ takes works."""
    cases = {"int f(int x) { return x + 1; }\nint main() { if (f(2) != 4) return 1; }\n": FAILED,
             "int main() { return 3; }\n": FAILED,
             "int main() { int x = 1; x++; }\n": PASSED,
             "int main(int c, char **v, char **e) { return c == 1 && v[1] == nullptr ? 0 : 1; }\n":
                 PASSED,
             "int main(int c, const char *v[]) { return 0; }\n": PASSED,
             "#include <cstdlib>\nint main() { std::exit(0); return 1; }\n": FAILED}
    for source, outcome in cases.items():
        assert run(sandbox, "cpp", source).outcome == outcome, source


#: A C++20 program (``std::span``), which no C++17 compiler takes.
CXX20 = ("#include <span>\n#include <vector>\n"
         "int main() { std::vector<int> v{1, 2}; return std::span<int>(v).size() == 2 ? 0 : 1; }\n")


def test_cpp_programs_compile_under_the_standard_asked_for(sandbox: Sandbox, run: Run) -> None:
    result = run(sandbox, "cpp", CXX20)  # MultiPL-E's c++17 unless told
    assert result.outcome == SYNTAX_ERROR, result
    assert re.search(r"span. is not a member of .std", result.error), result.error
    with Sandbox(workers=1, cpp_standard="c++20") as newer:
        assert run(newer, "cpp", CXX20).outcome == PASSED
        # and its precompiled <bits/stdc++.h> is C++20's
        assert run(newer, "cpp", "#include <bits/stdc++.h>\n" + CXX20).outcome == PASSED
        # a verdict cached under one standard is not another's
        assert newer.runtime("cpp") == sandbox.runtime("cpp").replace("-std=c++17", "-std=c++20")
    with pytest.raises(ValueError, match="cpp_standard must name a C\\+\\+ standard"):
        Sandbox(workers=1, cpp_standard="c++99")


def test_a_cpp_program_s_macros_do_not_reach_the_harness(sandbox: Sandbox, run: Run) -> None:
    """Competitive-programming habits: ``int`` made ``long long``, ``read``/``write`` and
    ``ssize_t`` redefined, ``main`` spelled ``signed main``."""
    habits = ("#include <bits/stdc++.h>\n#define int long long\n#define read(x) std::cin >> x\n"
              "#define write(x) std::cout << (x)\n#define ssize_t float\n#define char int\n")
    for tail, outcome in (("signed main() { int x = 1LL << 40; assert(x > 0); }\n", PASSED),
                          ("signed main() { int x = 1; assert(x == 2); }\n", FAILED)):
        result = run(sandbox, "cpp", habits + tail)
        assert result.outcome == outcome, result.error
    # globals named as libc's functions (C++ does not mangle a variable's name)
    names = "#include <cassert>\nbool write = false;\nint read[4];\nint syscall;\n"
    result = run(sandbox, "cpp", names + "int main() { assert(!write && !read[0]); }\n")
    assert result.outcome == PASSED, result.error


@pytest.mark.parametrize(("source", "outcome", "said"), [
    # an assertion whose expression spans lines (a raw string literal's) is still a failure
    ('#include <cassert>\n#include <string>\n'
     'int main() { assert(std::string("a") == R"(a\nb)"); }\n', FAILED, "Assertion `"),
    # output past the file size limit is lost (not the program killed), as it would be cut
    ("#include <cstdio>\nint main() {\n  static char block[1 << 16];\n"
     "  for (int i = 0; i < 1025; i++) fwrite(block, 1, sizeof block, stdout);\n}\n", PASSED,
     ""),
])
def test_a_cpp_program_ends_as_it_would_outside(sandbox: Sandbox, run: Run, source: str,
                                                outcome: str, said: str) -> None:
    result = run(sandbox, "cpp", source)
    assert result.outcome == outcome, result
    assert said in result.error, result.error


def test_programs_run_whatever_the_user_s_umask(run: Run) -> None:
    """The folders the worker makes (the case, the C++ build outputs) reach the programs' uid
    under a umask of 077 too."""
    old = os.umask(0o077)
    try:
        with Sandbox(workers=1) as box:
            for language in ("python", "cpp", "javascript", "java"):
                result = run(box, language, PROGRAMS[language][PASSED])
                assert result.outcome == PASSED, (language, result.error)
    finally:
        os.umask(old)


ASYNC_TEST = ("const assert = require('node:assert');\n"
              "(async () => {{\n  await new Promise((done) => setTimeout(done, 10));\n"
              "  {}\n  assert.strictEqual(1 + 1, 2);\n}})();\n")


@pytest.mark.parametrize(("step", "outcome"), [
    ("", PASSED),
    ("assert.strictEqual(1 + 1, 3);", FAILED),
    ("process.exit(0);", FAILED),  # before its tests: no pass (it passed when the token went
    ("process.exitCode = 1;", FAILED),  # out at the end of the synchronous code)
])
def test_javascript_tests_that_await_end_before_the_token(sandbox: Sandbox, run: Run,
                                                          step: str, outcome: str) -> None:
    result = run(sandbox, "javascript", ASYNC_TEST.format(step))
    assert result.outcome == outcome, result


@pytest.mark.parametrize(("source", "outcome"), [
    ("const a = ;\n", SYNTAX_ERROR),
    ("import assert from 'node:assert';\nconst a = ;\n", SYNTAX_ERROR),  # an ES module
    ("JSON.parse('{');\n", FAILED),  # a SyntaxError of the program's own
    ("const assert = require('node:assert');\n"  # node's words in a failing assertion
     "assert.strictEqual('SyntaxError: x\\n    at wrapSafe (node:internal)', '');\n", FAILED),
])
def test_javascript_syntax_errors_are_node_s_own(sandbox: Sandbox, run: Run, source: str,
                                                 outcome: str) -> None:
    result = run(sandbox, "javascript", source)
    assert result.outcome == outcome, result


@pytest.mark.parametrize("keeper", [
    "process.on('uncaughtException', () => {});",
    "process.setUncaughtExceptionCaptureCallback(() => {});",
])
def test_a_javascript_error_that_the_program_kept_from_ending_node_is_shown(
        sandbox: Sandbox, run: Run, keeper: str) -> None:
    """Plain node exits 0; the tests stopped at the error: a failure whose text shows it."""
    result = run(sandbox, "javascript",
                 f"{keeper}\nsetTimeout(() => {{ throw new Error('the test failed'); }}, 1);\n")
    assert result.outcome == FAILED, result
    assert "listener, process.setUncaughtExceptionCaptureCallback) then kept" in result.error
    assert "Error: the test failed\n    at Timeout._onTimeout (program.js:" in result.error


def test_the_javascript_domain_module_does_not_load(sandbox: Sandbox, run: Run) -> None:
    """process.domain is the harness's (node reads it as it records a rejection nothing
    handled); the deprecated domain module, which would redefine it, fails to load."""
    result = run(sandbox, "javascript", "require('node:domain');\n")
    assert result.outcome == FAILED, result
    assert "TypeError: Cannot redefine property: domain" in result.error, result


def test_a_javascript_failure_after_the_end_takes_the_pass_back(sandbox: Sandbox,
                                                                 run: Run) -> None:
    """Tests in a beforeExit listener that runs after the harness's fail before the token, which
    waits for node's own exit; in an exit listener after the harness's, after it: the harness
    ends the program at once, whatever exit status the program would set."""
    result = run(sandbox, "javascript",
                 "process.on('exit', () => { process.exitCode = 0; });\n"
                 "process.once('beforeExit', () => require('assert').strictEqual(1, 2));\n")
    assert result.outcome == FAILED, result
    assert "1 !== 2" in result.error
    result = run(sandbox, "javascript",
                 "process.on('uncaughtException', () => { process.exitCode = 0; });\n"
                 "process.on('exit', () => require('assert').strictEqual(1, 2));\n")
    assert result.outcome == FAILED, result
    assert result.error.startswith("hybridmetric: an error nothing caught after node's own "
                                   "exit began (in an exit listener): no pass\n"), result.error
    assert "1 !== 2" in result.error
    # tests that a beforeExit listener starts, and a process.exit(0) before they end
    result = run(sandbox, "javascript",
                 "function add(a, b) { return a - b; }\n"
                 "process.once('beforeExit', () => {\n"
                 "  setTimeout(() => require('assert').strictEqual(add(1, 2), 3), 10);\n"
                 "  setImmediate(() => process.exit(0));\n});\n")
    assert result.outcome == FAILED, result


def test_javascript_s_bindings_are_closed(sandbox: Sandbox, run: Run) -> None:
    """Through ``process.binding`` a program could rewrite the asynchronous ids by which the
    harness tells node's own end of the program from one it made itself ("async_wrap"), or
    drop what the harness writes ("fs"); a handle's ``asyncReset`` still takes a resource of
    the program's own, as node's HTTP agent gives it one."""
    for name in ("async_wrap", "util"):
        result = run(sandbox, "javascript", f"process.binding({{toString: () => '{name}'}});\n")
        assert result.outcome == FAILED, result
        assert f'process.binding("{name}") is closed in the sandbox' in result.error
    assert run(sandbox, "javascript", "const zlib = require('zlib').createDeflate();\n"
                                      "zlib._handle.asyncReset({});\n"
                                      "require('assert').strictEqual(process.binding.name, "
                                      "'binding');\n").outcome == PASSED


def test_javascript_es_modules_run(sandbox: Sandbox, run: Run) -> None:
    module = "import assert from 'node:assert';\nassert.strictEqual(1 + 1, {});\n"
    assert run(sandbox, "javascript", module.format(2)).outcome == PASSED
    assert run(sandbox, "javascript", module.format(3)).outcome == FAILED
    own_names = ("import assert from 'node:assert';\nfunction process(x) { return 2 * x; }\n"
                 "class Buffer {}\nassert.strictEqual(process(2), 4);\n")
    assert run(sandbox, "javascript", own_names).outcome == PASSED


@pytest.mark.parametrize(("check", "outcome"), [("1 + 1 == 2", PASSED), ("1 + 1 == 3", FAILED)])
def test_java_reads_unicode_escapes_as_javac_does(sandbox: Sandbox, run: Run, check: str,
                                                   outcome: str) -> None:
    """``\\u0070ublic`` is ``public`` to javac (JLS 3.3), in names too; an escaped backslash
    starts no escape (the string holds a backslash, then ``u0041``)."""
    source = ("\\u0070ublic class Pro\\u0062lem {\n"
              "  \\u0070ublic static void main(String[] a) {\n"
              "    if (!\"\\\\u0041\".equals(\"\\\\\" + \"u0041\")) throw new AssertionError();\n"
              f"    if (!({check})) throw new AssertionError();\n  }}\n}}\n")
    result = run(sandbox, "java", source)
    assert result.outcome == outcome, result


#: Unicode escapes after backslashes, raw or escaped themselves (``\\u005c``), which javac
#: (JDK 16 on) reads otherwise than the JLS's rule of an even number of backslashes, and
#: escapes whose hex digits are not ASCII.
BACKSLASHED_ESCAPES = ["\\u0041", "\\\\u0041", "\\\\\\u0041", "\\u005c\\\\u0041",
                       "\\u005c\\u005c\\u0041", "\\u005c\\u005c\\u005c\\\\u0041",
                       "\\uuu005c\\\\u0041", "\\u005c\\u005c", "a\\\\\\\\b",
                       # (hex digits as javac reads them: any decimal digit, fullwidth A to F)
                       "\\u\u0660\u0660\u0664\u0661", "\\u\uff10\uff10\uff14\uff21",
                       "\\u00\uff44\uff46"]


def test_java_unicode_escapes_are_read_as_javac_reads_them(tmp_path: Path) -> None:
    """The sandbox's reading of a Java source (which finds the tests' class) translates
    Unicode escapes as javac does, checked against javac itself: each sequence, in a string
    literal, prints what the translation holds once its escaped backslashes are read."""
    if not shutil.which("javac"):
        pytest.skip("no javac")
    lines = "".join(f'    System.out.println("[" + "{s}" + "]");\n' for s in BACKSLASHED_ESCAPES)
    (tmp_path / "E.java").write_text(
        f"public class E {{\n  public static void main(String[] a) {{\n{lines}  }}\n}}\n")
    subprocess.run(["javac", "E.java"], cwd=tmp_path, check=True)
    printed = subprocess.run(["java", "E"], cwd=tmp_path, check=True, capture_output=True,
                             text=True).stdout.splitlines()
    read = [f"[{_java_unescaped(s).replace(chr(92) * 2, chr(92))}]" for s in BACKSLASHED_ESCAPES]
    assert read == printed


def test_java_runs_the_tests_main(sandbox: Sandbox, run: Run) -> None:
    helper_first = ("class Helper { public static void main(String[] a) { } }\n"
                    "class Problem { public static void main(String[] a) { assert 1 == 2; } }\n")
    assert run(sandbox, "java", helper_first).outcome == FAILED
    assert run(sandbox, "java", "package p;\nclass Problem { public static void main(String[] a)"
               " { assert 1 == 2; } }\n").outcome == FAILED
    assert run(sandbox, "java", "class Problem { public static <T> void main(String[] a)"
               " { assert 1 == 2; } }\n").outcome == FAILED
    assert run(sandbox, "java", "class Problem { public static <T extends Comparable<T>> void "
               "main(String[] a) { assert 1 == 2; } }\n").outcome == FAILED
    nested_helper = ("class Problem {\n  static class Pair { int a; Pair(int a) { this.a = a; } }\n"
                     "  public static void main(String[] a) { assert new Pair(1).a == 2; }\n}\n")
    assert run(sandbox, "java", nested_helper).outcome == FAILED
    # names the harness uses, declared by the program; a package; a name in another script
    for source in ("class Math {}\nclass Throwable {}\nclass java {}\n"
                   "class Problem { public static void main(String[] a) { } }\n",
                   "package tests.humaneval;\nclass Problem {\n"
                   "  public static void main(String[] a) { assert Problem.class.getName()"
                   ".equals(\"tests.humaneval.Problem\"); }\n}\n",
                   "class Задача { public static void main(String[] a) { } }\n",
                   "public class HybridmetricMain { public static void main(String[] a) { } }\n",
                   # a package of its own inside the harness's (a folder there)
                   "package hybridmetric_harness.sub;\n"
                   "class Problem { public static void main(String[] a) { } }\n",
                   "class Problem { static public void main(String[] a) { } }\n",
                   "public interface Problem { static void main(String[] a) { } }\n",
                   "public enum Problem { A; public static void main(String[] a) { } }\n",
                   "public record Problem(int x) { public static void main(String[] a) { } }\n",
                   # an annotation type is the public one; a name ending in "package"
                   "public @interface Ann {}\nclass Problem {\n"
                   "  public static void main(String[] a) { assert 1 + 1 == 2; }\n}\n",
                   "class Problem {\n  static class a$package {}\n  static a$package x;\n"
                   "  public static void main(String[] a) { assert 1 + 1 == 2; }\n}\n"):
        assert run(sandbox, "java", source).outcome == PASSED, source


@pytest.mark.parametrize("name", ["A" * 300, "Ж" * 130])
def test_a_java_public_type_too_long_to_name_its_file_does_not_compile(
        sandbox: Sandbox, run: Run, name: str) -> None:
    """Its file must be named after it, which no file system allows (over 255 bytes): javac
    could not compile it anywhere (a type that is not public is javac's to refuse)."""
    source = (f"public class {name} {{}}\n"
              "class Problem { public static void main(String[] a) { } }\n")
    result = run(sandbox, "java", source)
    assert result.outcome == SYNTAX_ERROR, result
    assert "longer than a file name may be (255 bytes)" in result.error


@pytest.mark.parametrize(("source", "precompiled"), [
    ("#include<assert.h>\n#include<bits/stdc++.h>\nint main() {}\n", True),  # MultiPL-E's
    ("// all of it\n/* the\n   library */ #include <bits/stdc++.h> // here\n", True),
    ("#define _GLIBCXX_DEBUG\n#include <bits/stdc++.h>\n", False),  # would change the header
    ('#include "mine.h"\n#include <bits/stdc++.h>\n', False),  # a header of its own first
    ("#include <vector>\n#include <stdio.h>\n#include <bits/stdc++.h>\n", True),  # standard ones
    ("#include <unistd.h>\n#include <bits/stdc++.h>\n", False),  # another library's first
    ("int x;\n#include <bits/stdc++.h>\n", False),
    ("// #include <bits/stdc++.h>\n#include <cstdio>\n", False),  # only in a comment
    ("// a comment that goes on \\\n#include <bits/stdc++.h>\n", False),  # (still a comment)
    ("// so does this \\ \n#include <bits/stdc++.h>\n", False),  # (blank space after it)
    ("// not in C++14 ??/\n#include <bits/stdc++.h>\n", False),  # (a trigraph's backslash)
    ("// a CR ends it\r#define NDEBUG\n#include <bits/stdc++.h>\n", False),
    ("#include <cstdio>\r\n#include <bits/stdc++.h>\r\nint main() {}\r\n", True),  # CR LF
])
def test_the_precompiled_header_stands_in_only_where_it_means_the_same(
        source: str, precompiled: bool) -> None:
    assert uses_stdcxx(source) == precompiled


@pytest.mark.parametrize(("source", "outcome"), [
    # debug mode, asked for before the header: the out-of-range index aborts the program
    ("#define _GLIBCXX_DEBUG\n#include <bits/stdc++.h>\n"
     "int main() { std::vector<int> v(3); return v[3]; }\n", CRASH),
    # the header named in a comment only: the program's y1 does not meet <cmath>'s
    ("// no #include <bits/stdc++.h> here\n#include <cstdio>\n"
     "int y1 = 0;\nint main() { return y1; }\n", PASSED),
    # ... or joined to a comment, by a backslash that blank space follows
    ("// the next line is this comment's \\ \n#include <bits/stdc++.h>\n#include <cstdio>\n"
     "int y1 = 0;\nint main() { return y1; }\n", PASSED),
    # assertions of the library, asked for after a comment that a CR alone ends
    ("// checked\r#define _GLIBCXX_ASSERTIONS 1\n#include <bits/stdc++.h>\n"
     "int main() { std::vector<int> v(3); return v[3]; }\n", CRASH),
])
def test_a_cpp_program_means_what_it_says_before_its_headers(sandbox: Sandbox, run: Run,
                                                             source: str, outcome: str) -> None:
    result = run(sandbox, "cpp", source, LIMITS)
    assert result.outcome == outcome, result


@pytest.mark.parametrize(("source", "outcome", "memory_mb"), [
    # 600 MB of initialised data: the object and the program outgrow the build's 1 GB tmpfs
    ("int a[150000000] = {1};\nint main() { return a[0] - 1; }\n", MEMORY, 2048),
    # 800 MB of zeros (bss) over a 512 MB limit: the kernel would kill it in exec (SIGSEGV)
    ("static int a[200000000];\nint main() { a[5] = 1; return a[5] - 1; }\n", MEMORY, 512),
    # 80 MB of initialised data: larger than the file limit of a program, not of its build
    ("int a[20000000] = {1};\nint main() { return a[0] - 1; }\n", PASSED, 512),
])
def test_a_cpp_program_s_static_data_is_judged_as_memory(sandbox: Sandbox, run: Run,
                                                         source: str, outcome: str,
                                                         memory_mb: int) -> None:
    result = run(sandbox, "cpp", source, Limits(timeout_s=10.0, memory_mb=memory_mb))
    assert result.outcome == outcome, result


def test_a_cpp_program_whose_compile_runs_out_of_memory_is_memory(sandbox: Sandbox,
                                                                 run: Run) -> None:
    """A valid program whose macros expand to 2**28 initialisers: the compiler runs out of the
    memory its build gets (2 GiB here), in its own words; a program that quotes them in its
    own error is a syntax error still."""
    doubling = "".join(f"#define X{n} X{n - 1} X{n - 1}\n" for n in range(1, 29))
    source = f"#define X0 1,\n{doubling}int a[] = {{X28}};\nint main() {{ return a[0] - 1; }}\n"
    result = run(sandbox, "cpp", source, Limits(timeout_s=30.0, memory_mb=1024))
    assert result.outcome == MEMORY, result
    assert "compiling took over the 2048 MiB" in result.error
    quoted = run(sandbox, "cpp", "#error virtual memory exhausted\nint main() {}\n", LIMITS)
    assert quoted.outcome == SYNTAX_ERROR, quoted


def test_a_cpp_program_s_memory_is_the_cgroup_s_to_judge(sandbox: Sandbox, run: Run) -> None:
    """Where there is a memory cgroup, a C++ program gets no RLIMIT_DATA: a ``malloc`` bomb,
    which under the rlimit gets a null pointer and crashes on it, is the OOM killer's
    (``memory``); a block over the limit that the program never touches costs it nothing, as
    outside the sandbox."""
    if not sandbox.isolation.memory_cgroup:
        pytest.skip("no memory cgroup here: RLIMIT_DATA is the only memory limit")
    limits = Limits(timeout_s=20.0, memory_mb=256)
    bomb = ("#include <cstdlib>\n#include <cstring>\n"
            "int main() {\n  for (;;) {\n    char *p = (char *)malloc(1 << 24);\n"
            "    memset(p, 1, 1 << 24);\n  }\n}\n")
    result = run(sandbox, "cpp", bomb, limits)
    assert result.outcome == MEMORY and result.error.startswith(
        "killed by the kernel's OOM killer: the program's processes used their memory limit "
        "(256 MiB)"), result
    untouched = ("#include <cstdlib>\n"
                 "int main() { return malloc(size_t(512) << 20) == nullptr; }\n")
    assert run(sandbox, "cpp", untouched, limits).outcome == PASSED


def test_a_python_program_may_reserve_what_it_never_touches_under_a_cgroup(
        sandbox: Sandbox, run: Run) -> None:
    """Where there is a memory cgroup, it caps what a Python program uses, and RLIMIT_DATA sits
    1 GiB above the limit: 150 threads at once (8 MiB of stack reserved each, which a 256 MiB
    RLIMIT_DATA holds fewer than 32 of: "can't start new thread") and 768 MiB mapped but never
    touched run, as outside; memory used past the limit is the OOM killer's (``memory``, saying
    so), and an allocation far past it still fails at once, a ``MemoryError`` with its
    traceback."""
    if not sandbox.isolation.memory_cgroup:
        pytest.skip("no memory cgroup here: RLIMIT_DATA is the memory limit")
    limits = Limits(timeout_s=20.0, memory_mb=256)
    threads = ("import threading\nready = threading.Barrier(151)\n"
               "threads = [threading.Thread(target=ready.wait) for _ in range(150)]\n"
               "for t in threads:\n    t.start()\nready.wait()\n"
               "for t in threads:\n    t.join()\n")
    assert run(sandbox, "python", threads, limits).outcome == PASSED
    reserved = ("import mmap\nm = mmap.mmap(-1, 768 << 20, flags=mmap.MAP_PRIVATE)\n"
                "m[0] = 1\nassert m[0] == 1\n")
    assert run(sandbox, "python", reserved, limits).outcome == PASSED
    grows = "blocks = []\nwhile True:\n    blocks.append(bytearray(1 << 24))\n"
    result = run(sandbox, "python", grows, limits)
    assert result.outcome == MEMORY and "OOM killer" in result.error, result
    far = "x = 1\nblock = bytearray(2 << 30)\n"
    result = run(sandbox, "python", far, limits)
    assert result.outcome == MEMORY and result.error.endswith(
        'line 2, in <module>\n    block = bytearray(2 << 30)\nMemoryError\n'), result


def test_static_data_that_leaves_the_libraries_no_room(sandbox: Sandbox, run: Run) -> None:
    """512 MiB less 16 KiB of zeros under a 512 MiB limit: under RLIMIT_DATA alone (no memory
    cgroup) the libraries do not fit beside it, and the kernel ends the program in exec
    (``memory``); a memory cgroup counts only the pages it touches, and it runs, as outside."""
    source = "static char a[(512ULL << 20) - 16 * 1024];\nint main() { a[0] = 1; return a[1]; }\n"
    expected = PASSED if sandbox.isolation.memory_cgroup else MEMORY
    assert run(sandbox, "cpp", source, ROOMY).outcome == expected


def test_java_code_reads_an_unclosed_comment_or_literal_to_its_end() -> None:
    """javac refuses a comment or text block left open (and a literal left open on its line);
    read as running to the end (of the file, of the line), each of thousands of ``/*`` in a
    program is not read to the end again (which took 23 s on 48 KB)."""
    assert java_code("class A {} /* open\nclass B {}") == "class A {}" + " " * 8 + "\n" + " " * 10
    assert java_code('class A { String s = "open\nclass B {}') == (
        "class A { String s = " + " " * 5 + "\nclass B {}")
    assert java_code('class A { String t = """\nopen') == "class A { String t = " + " " * 3 + (
        "\n" + " " * 4)
    assert java_code("/* " * 3) == " " * 9
    # javac leaves the characters Character.isIdentifierIgnorable names out of identifiers
    for spelling in ("\\u200b", "\u00ad", "\\u0001", "\x01"):
        package = f"package hybridmetric_{spelling}harness;\nclass A {{}}"
        assert java_code(package).startswith("package hybridmetric_harness;"), spelling
        with pytest.raises(ValueError, match="the test harness's own"):
            java_binary_name(package + "\npublic class P {\n"
                             "  public static void main(String[] a) {}\n}\n")


def test_java_main_class_is_found() -> None:
    source = "import java.util.*;\nclass Helper {}\nclass Problem {\n  public static void main("
    assert java_main_class(source) == "Problem"
    with pytest.raises(ValueError, match="main"):
        java_main_class("class A {}")
    # MultiPL-E's HumanEval_153 says "the class and a list" in a comment; strings say it too
    tricky = ("class Problem {\n  // given the class and a list of extensions\n"
              "  /* class Block */ static String s = \"class Str {\";\n"
              "  static char c = '\\'';\n  public static void main(String[] a) {}\n}\n")
    assert java_main_class(tricky) == "Problem"
    # the last main, a public class's too (the tests' comes last); modifiers in any order;
    # instance mains skipped
    two = "class Tests { public static void main(String[] a) {} }\n"
    public = "public class A { public static void main(String[] a) {} }\n"
    assert java_main_class(public + two) == "Tests"
    assert java_main_class(two + public) == "A"
    assert java_main_class("class A { public static void main(String[] a) {} }\n" + two) == "Tests"
    assert java_main_class("class A { static public void main(String[] a) {} }") == "A"
    with pytest.raises(ValueError, match="main"):
        java_main_class("class A { public void main(String[] a) {} }")
    nested = "class A { static class B { public static void main(String[] a) {} } }"
    assert java_main_class(nested) == "A.B"
    assert java_binary_name(nested) == "A$B"
    assert java_binary_name("/* package x; */ package  org . tests ;\n" + nested) == "org.tests.A$B"
    assert java_main_class("class Задача { public static void main(String[] a) {} }") == "Задача"
    for name in ("परीक्षा", "Price€", "_$x1"):  # (combining marks, currency symbols: javac's too)
        main = f"class {name} {{ public static void main(String[] a) {{}} }}"
        assert java_main_class(main) == name
    # braces in a type's header: an annotation's array among a record's components, on a type
    # it implements or extends
    assert java_main_class("record Problem(@SuppressWarnings({\"unchecked\", \"rawtypes\"}) "
                           "java.util.List x) { public static void main(String[] a) {} }\n"
                           ) == "Problem"
    assert java_main_class("class Problem implements @A({1, 2}) Runnable { public void run() {}"
                           " public static void main(String[] a) {} }") == "Problem"
    assert java_main_class("class A { static class B extends @X({1}) Object {"
                           " public static void main(String[] a) {} } }") == "A.B"
    # a later main that the launcher would not run: other parameters, an interface's private one
    tests = "class Main { public static void main(String[] a) {} }\n"
    for later in ("class Util { public static void main(java.util.List<Long> xs) {} }",
                  "class Util { public static void main() {} }",
                  "interface Later { private static void main(String[] a) {} }"):
        assert java_main_class(tests + later) == "Main", later
    for parameters in ("final String... args", "@Deprecated java.lang.String args[]",
                       "String [] args", "final @A(x = 1) String[]a"):
        assert java_main_class(f"class A {{ public static void main({parameters}) {{}} }}") == "A"
    assert java_main_class(tests + "interface I { static void main(String[] a) {} }") == "I"
    helper = "class A { static class Pair { } public static void main(String[] a) {} }"
    assert java_main_class(helper) == "A"
    assert java_main_class("class A { boolean f(Object record) { return record instanceof A; }"
                           " public static void main(String[] a) {} }") == "A"
    # modifiers read back from main: type parameters, an interface's, a long run before a field
    assert java_main_class("class A { final public static <T> void main(String[] a) {} }") == "A"
    assert java_main_class("class A { public static <T extends Comparable<? super T>, "
                           "K extends Map<K, List<Set<T>>>> void main(String[] a) {} }") == "A"
    assert java_main_class("class A {} interface I { static void main(String[] a) {} }") == "I"
    assert java_main_class("class A { public void main(String[] a) {} }\nclass B {"
                           + " static" * 5000 + " int x; public\tstatic\nvoid main(String[] a)"
                           " {} class C { } }") == "B"
    # annotations in main's type, between its type parameters and void, nested arguments
    for parameters in ("String @NonNull [] args", "java.lang.@A String @B ... args",
                       "final @A(x = (1 + f(2))) String args @C []"):
        assert java_main_class(f"class A {{ public static void main({parameters}) {{}} }}") == "A"
    assert java_main_class(tests + "class P { public static <T> @Deprecated void main(String[] a)"
                           " {} }") == "P"
    assert java_main_class(tests + "class P { public @A(((1))) static void main(String[] a) {} }"
                           ) == "P"
    with pytest.raises(ValueError, match="main"):  # (publicstatic is no modifier)
        java_main_class("class A { publicstatic void main(String[] a) {} }")


def test_java_main_class_reads_annotations_and_refuses_classes_javac_numbers() -> None:
    """An annotation among main's modifiers is skipped (read as a stop, the tests' main was
    skipped for an earlier one, which passed); a main whose class javac numbers (in an enum
    constant's body, an anonymous class, a method) is refused, not given another class's name;
    a chain of 20,000 nested classes is read in linear time and memory."""
    helper = "class Helper { public static void main(String[] a) { } }\n"
    annotated = ("class Problem { public @SuppressWarnings(\"unused\") static void "
                 "main(String[] a) { throw new AssertionError(); } }\n")
    assert java_main_class(helper + annotated) == "Problem"
    assert java_main_class(helper + "class P { @Deprecated @ java . lang . SafeVarargs(x = (1))"
                           " public static void main(String[] a) {} }") == "P"
    with pytest.raises(ValueError, match="an annotation's arguments do not close"):
        java_main_class(helper + "class P { x) public static void main(String[] a) {} }")
    enum_body = ("class E$Inner { public static void main(String[] a) { } }\n"
                 "enum E { A { class Inner { public static void main(String[] a) {} } } }\n")
    with pytest.raises(ValueError, match="class Inner is declared in a block"):
        java_main_class(enum_body)
    anonymous = ("class P { public static void main(String[] a) {} static Object o = new "
                 "Object() { public static void main(String[] a) {} }; }")
    with pytest.raises(ValueError, match="no named class declares the Java main method"):
        java_main_class(anonymous)
    # a main after braces that do not pair (a completion cut off): the class around it, as
    # before (javac refuses the program, and says why)
    assert java_main_class("class P { int f() { if (x) {\n public static void "
                           "main(String[] a) {} }") == "P"
    chain = helper + "class A{" * 20_000 + "}" * 20_000
    assert java_main_class(chain) == "Helper"
    # annotations around a chain of mains: each main's arguments paired once, not counted out
    nested = "@A(" * 3000 + ") public static void main(String[] a) {} " * 3000
    assert java_main_class(f"class P {{ {nested}}}") == "P"
    assert java_public_type('public @SuppressWarnings("all") final class Solution {}') == "Solution"
    assert java_public_type('public @SuppressWarnings(("all")) class Solution {}') == "Solution"
    assert java_public_type("public @ interface Ann {}\nclass P {}") == "Ann"
    assert java_public_type("public @Retention(RUNTIME) @interface Ann {}") == "Ann"
    # keywords inside names: a field of type a$package, a method of type b€class
    tricky = ("class P {\n  a$package x;\n  b\u20acclass f() { return null; }\n"
              "  public static void main(String[] a) {}\n}\n")
    assert java_binary_name(tricky) == "P"
    assert java_public_type("class P {}\nmy$public class Q {}") is None
    # long runs of modifiers and annotations that declare nothing: each matched once
    for run in ("public " * 3000 + "@a " * 3000, "public @a " * 3000, "public @a(" + "x" * 30_000):
        assert java_public_type(run + "x") is None


def test_unknown_language_is_an_error(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="supported: python, javascript, cpp, java"):
        sandbox.run([Program("cobol", "DISPLAY 'HI'.", LIMITS)])


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (1, 1, 1, 1.0),
    (1, 0, 1, 0.0),
    (10, 0, 5, 0.0),  # c = 0 gives 0
    (5, 2, 1, 2 / 5),
    (5, 2, 2, 1 - (3 * 2) / (5 * 4)),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (10, 3, 4, 1 - 35 / 210),  # 1 - C(7,4)/C(10,4)
    (4, 2, 3, 1.0),  # n - c < k: every draw of 3 holds a correct sample
    (200, 13, 1, 13 / 200),
])
def test_pass_at_k_matches_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert math.isclose(pass_at_k(n, c, k), expected, rel_tol=1e-12)


def test_pass_at_k_matches_combinatorial_definition() -> None:
    for n, c, k in [(20, 7, 5), (100, 40, 10), (30, 1, 29)]:
        assert math.isclose(pass_at_k(n, c, k), 1 - math.comb(n - c, k) / math.comb(n, k),
                            rel_tol=1e-9)


def test_pass_at_k_edge_cases_are_errors() -> None:
    with pytest.raises(ValueError, match="k=6 is larger than the n=5"):
        pass_at_k(5, 1, 6)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError, match="at least 1"):
        pass_at_k(5, 1, 0)
    with pytest.raises(TypeError):
        pass_at_k(5.0, 1, 1)  # type: ignore[arg-type]


def test_every_wall_is_up_as_root(sandbox: Sandbox) -> None:
    isolation = sandbox.isolation
    assert isolation.network_namespace and isolation.seccomp and isolation.mount_namespace
    assert isolation.uid is not None and isolation.uid in sandbox.uids and isolation.uid != 0


def test_programs_reach_the_interpreter_but_not_root_home(sandbox: Sandbox, run: Run) -> None:
    """The sandbox uid imports stdlib and compiled modules through the re-exposed installation,
    while the rest of an unreadable directory on the way (here /root) stays hidden."""
    private = [os.path.join("/root", name) for name in os.listdir("/root")
               if not sys.prefix.startswith(os.path.join("/root", name))
               and not sys.base_prefix.startswith(os.path.join("/root", name))]
    source = (
        "import os, glob, decimal, json, sqlite3\n"
        f"seen = [p for p in {private!r} if os.path.lexists(p)]\n"
        "assert seen == [], seen\n"
    )
    assert run(sandbox, "python", source, LIMITS).outcome == PASSED


SWEEP_LOOK = """
import json, subprocess, sys
from hybridmetric.sandbox.isolation import _only_spare_children
alone = _only_spare_children(())
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)]
pids = [kid.pid for kid in kids]
seen = [_only_spare_children(pids), _only_spare_children(pids[:1]), _only_spare_children(())]
for kid in kids:
    kid.kill()
    kid.wait()
print(json.dumps([alone, seen, _only_spare_children(())]))
"""


def test_the_sweeps_one_read_sees_every_child_but_the_spared() -> None:
    """After each program the worker reads its list of children once (a descriptor it keeps
    open): only the spared ones (its servers) there, and nothing is left to hunt."""
    done = subprocess.run([sys.executable, "-c", SWEEP_LOOK], capture_output=True, text=True,
                          check=True, timeout=60)
    assert json.loads(done.stdout) == [True, [True, False, False], True]


def test_dead_worker_gives_sandbox_error_and_is_replaced() -> None:
    with Sandbox(workers=1) as box:
        worker = box._workers[0]
        assert worker.process is not None
        worker.process.kill()
        worker.process.wait()
        [lost] = box.run([Program("python", "assert True\n", LIMITS)])
        assert lost.outcome == SANDBOX_ERROR and "worker died" in lost.error
        [again] = box.run([Program("python", "assert True\n", LIMITS)])
        assert again.outcome == PASSED


HOST = """
import json, sys
from hybridmetric.sandbox import Limits, Program, Sandbox
with Sandbox(workers=2, cache=None) as box:
    print(json.dumps([box.uids, [w.process.pid for w in box._workers]]), flush=True)
    box.run([Program("python", "import time\\ntime.sleep(300)\\n", Limits(timeout_s=300))] * 2)
"""


def _of_uids(uids: set[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(FileNotFoundError):
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid in uids:
                found.append(int(entry))
    return found


def test_a_killed_caller_leaves_no_worker_or_program_behind() -> None:
    """SIGKILL the process that runs the sandbox while its programs sleep: the workers and the
    programs end at once (not when the programs' 300 s run out), and their uids are free."""
    if os.getuid() != 0:
        pytest.skip("the programs' own uids need root")
    host = subprocess.Popen([sys.executable, "-c", HOST], stdout=subprocess.PIPE, text=True)
    uids, workers = json.loads(host.stdout.readline())
    for _ in range(500):  # both programs started
        if len(_of_uids(set(uids))) >= 2:
            break
        time.sleep(0.01)
    host.kill()
    host.wait()
    host.stdout.close()
    for _ in range(3000):
        if not _of_uids(set(uids)) and not [p for p in workers if os.path.exists(f"/proc/{p}")]:
            break
        time.sleep(0.01)
    assert _of_uids(set(uids)) == []
    assert [p for p in workers if os.path.exists(f"/proc/{p}")] == []
    with Sandbox(workers=2, cache=None) as box:  # the same uids are free to claim again
        assert set(box.uids) == set(uids)


def test_scorer_refuses_sandbox_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmetric.scorers.pass_rate import PassRate

    def broken(self: Sandbox, programs: list[Program]) -> list[RunResult]:
        return [RunResult(SANDBOX_ERROR, "sandbox failure: disk full") for _ in programs]

    monkeypatch.setattr(Sandbox, "run", broken)
    frame = pd.DataFrame([{"task_id": "t", "candidate": "", "tests": {"cases": ["1"]}}])
    with PassRate(workers=1) as scorer, pytest.raises(RuntimeError, match="disk full"):
        scorer.score(frame)


def test_preloaded_modules_are_already_imported_in_programs(sandbox: Sandbox, run: Run) -> None:
    source = "import sys\nassert 'decimal' in sys.modules\n"
    assert run(sandbox, "python", source, LIMITS).outcome == FAILED  # not preloaded there
    with Sandbox(workers=1, preload=["decimal"]) as box:
        assert run(box, "python", source, LIMITS).outcome == PASSED


def test_fork_server_carries_no_threading_and_programs_may_use_it(run: Run) -> None:
    """Modules with an at-fork handler (threading, random) or many mappings (numpy, the
    package's own pandas) make every fork slower, so a fresh worker has not imported them
    (building the C++ header or the Java server later brings subprocess in); programs still
    can."""
    carried = "import sys\nassert {} & set(sys.modules) == set(), sys.modules\n".format(
        {"threading", "random", "subprocess", "numpy", "pandas", "hybridmetric.sandbox.pool",
         "sqlite3"})
    uses = ("import subprocess, threading\nout = []\n"
            "t = threading.Thread(target=lambda: out.append(subprocess.run(['true']).returncode))\n"
            "t.start()\nt.join()\nassert out == [0]\n")
    with Sandbox(workers=1) as box:
        assert run(box, "python", carried, LIMITS).outcome == PASSED
        assert run(box, "python", uses, LIMITS).outcome == PASSED


@pytest.mark.parametrize(("preload", "draw"), [
    ([], "random"), (["random"], "random"), (["numpy.random"], "numpy"), ([], "numpy")])
def test_every_program_draws_its_own_random_numbers(preload: list[str], draw: str,
                                                    run: Run) -> None:
    """As in separate ``python`` runs, ``random`` and numpy's global generator are seeded
    afresh in each program, whether the program imports them or the fork server had them
    preloaded (then their at-fork reseeding must reach every child; numpy has none of its own:
    with pandas preloaded, every program drew the same ``np.random.rand()``): no two of eight
    programs draw the same number."""
    source = {"random": "import random\nraise AssertionError(f'drawn {random.getrandbits(64)}')\n",
              "numpy": ("import numpy as np\n"
                        "raise AssertionError(f'drawn {np.random.randint(2**62)}')\n")}[draw]
    with Sandbox(workers=2, preload=preload) as box:
        results = box.run([Program("python", source + f"# {i}\n", LIMITS) for i in range(8)])
    drawn = {re.search(r"drawn (\d+)", result.error).group(1) for result in results}
    assert len(drawn) == 8, [result.error for result in results]


def test_missing_preload_module_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="(?s)no_such_module_xyz.*preload"):
        Sandbox(workers=1, preload=["no_such_module_xyz"])


def test_java_classpath_jars_are_used_and_missing_ones_reported(sandbox: Sandbox) -> None:
    source = ("import org.javatuples.*;\nclass Problem {\n  public static void main(String[] a) {\n"
              "    assert(Pair.with(1, \"x\").equals(Pair.with(1, \"x\")));\n  }\n}\n")
    if not os.path.exists("/usr/share/java/javatuples.jar"):
        pytest.skip("javatuples is not installed (apt-get install libjavatuples-java)")
    [with_jar] = sandbox.run([Program("java", source, LIMITS)])
    assert with_jar.outcome == PASSED, with_jar
    with Sandbox(workers=1, java_classpath=["/nonexistent/tuples.jar"]) as box:
        [missing] = box.run([Program("java", source, LIMITS)])
        [python] = box.run([Program("python", "assert True\n", LIMITS)])
    assert missing.outcome == SANDBOX_ERROR and "/nonexistent/tuples.jar" in missing.error
    assert python.outcome == PASSED



def test_needed_paths_leave_out_an_import_path_entry_that_shows_the_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``.pth`` file naming the home (or a folder above it) puts it on the import path: bound
    back, it would show the whole home to programs that run as the user. Other entries stay."""
    from hybridmetric.sandbox.worker import needed_paths

    home, other = tmp_path / "users" / "me", tmp_path / "lib"
    home.mkdir(parents=True)
    other.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(home), str(home.parent), str(other)])
    kept = needed_paths(homes=[str(other.parent / "elsewhere"), str(home)])
    assert str(home) not in kept and str(home.parent) not in kept and str(other) in kept
    assert {str(home), str(home.parent)} <= set(needed_paths())  # (no home: all kept)


def test_the_homes_hidden_are_those_no_program_runs_on(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root, ``$HOME`` and the account's home are covered; not "/", a missing one, one in
    a private directory or the kernel's folders, nor one a needed path holds (a system account's
    home, as ``bin``'s ``/usr/bin``, covered, took g++ and node away)."""
    from hybridmetric.sandbox import isolation

    assert isolation.homes_to_hide([str(tmp_path)], []) == []  # (in /tmp: a private directory)
    monkeypatch.setattr(isolation, "PRIVATE_DIRS", ("/nowhere",))  # (tmp_path lies in /tmp)
    outer, inner, venv = tmp_path / "home", tmp_path / "home" / "me", tmp_path / "venv"
    for folder in (inner, venv / "bin"):
        folder.mkdir(parents=True)
    (tmp_path / "link").symlink_to(inner)
    hidden = isolation.homes_to_hide([str(inner), str(tmp_path / "link"), str(outer), "/", "/dev",
                                      str(tmp_path / "missing"), str(venv / "bin")],
                                     [str(venv), "/"])
    assert hidden == [str(outer), str(inner)]  # (outer first; the link is the inner one)


def test_needed_paths_inside_private_dirs_are_bind_mounted_back():
    """A virtual environment under /tmp (a CI clone there, say) must stay reachable inside the
    private /tmp, and the cleanup after each program must leave it alone."""
    from hybridmetric.sandbox import isolation

    needed = ["/tmp/ci/main/.venv/bin/python", "/tmp/ci/shared", "/usr/lib", "/tmpfoo/x"]
    assert isolation._entries_below("/tmp", needed) == {"/tmp/ci"}
    assert isolation._entries_below("/var/tmp", needed) == set()


def test_no_program_learns_what_an_earlier_one_interned(run: Run) -> None:
    """Each program's code is loaded in its own child, so the identifiers it interns die with
    it (from Python 3.12 interned strings outlive the code that made them: loaded by the
    forking process, they would stay there for every later child to find)."""
    name = "zq_identifier_of_the_first_program"
    probe = ("import sys\nprobe = ''.join(['zq_identifier_', 'of_the_first_program'])\n"
             "assert sys.intern(probe) is probe, 'interned before this program'\n")
    with Sandbox(workers=1) as box:
        assert run(box, "python", probe, LIMITS).outcome == PASSED  # the probe itself works
        assert run(box, "python", f"{name} = 1\nassert {name}\n", LIMITS).outcome == PASSED
        assert run(box, "python", probe, LIMITS).outcome == PASSED
