"""The fork server's protocol on its own (no namespaces: it runs programs as the test's user)."""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import errno
import fcntl
import importlib.util
import json
import marshal
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmetric.sandbox import PASSED, Program, Sandbox, _boot, launcher, limits, pool
from hybridmetric.sandbox._boot import WORKER_MODULES, Compiled, compiled_modules
from hybridmetric.sandbox.compiling import precompile
from hybridmetric.sandbox.launcher import (
    DYING_S,
    TOKEN_BYTES,
    ForkServer,
    KillRounds,
    LauncherError,
    LaunchFailed,
    set_dumpable,
)
from hybridmetric.sandbox.worker import Process

LIMITS = (2**30, 5, 2**26, 64, 512, 0)  # memory, CPU s, file size, open files, processes, AS


def _passed(reply: tuple) -> bool:
    status, timed_out, report, token, *_ = reply
    return (os.waitstatus_to_exitcode(status) == 0 and not timed_out
            and report == b"T" + token[:TOKEN_BYTES])


PASS, KEY = b"p" * TOKEN_BYTES, b"k" * TOKEN_BYTES


@pytest.mark.parametrize(("report", "kind"), [
    (b"T" + PASS, b"T"),
    (b"junk" + b"T" + PASS, b"T"),
    (b"M" + KEY, b"M"),
    (b"junk" + b"E" + KEY, b"E"),
    (b"M" + KEY + b"T" + PASS, b"M"),  # a harness's failure report outweighs a pass
    (b"T" + KEY, b""),  # the key read back from the pipe and sent as a pass
    (b"T" + KEY + b"M" + KEY, b"M"),  # ... which hides no report after it
    (b"M" + PASS, b""),
    (b"S" + PASS, b"S"),  # Python's syntax error: with the pass token, sent before the program
    (b"S" + KEY, b""),  # ... never with the key, which a Python program can find (red team)
    (b"S" + KEY + b"E" + KEY, b"E"),  # ... nor hiding the harness's report after it
    (b"T", b""),
    (b"E" + KEY[:8], b""),  # a key cut short
    (b"", b""),
])
def test_each_report_counts_only_with_its_own_secret(report: bytes, kind: bytes) -> None:
    """``T`` counts with the pass token after it, and so does Python's ``S``, any other report
    with the report key: a program that reads a report back from its pipe learns no secret that
    makes a pass."""
    process = Process(0, False, report, PASS + KEY, "", "", 0, False, "")
    assert process.kind == kind
    assert process.completed == (kind == b"T")


def test_a_launch_that_fails_leaves_the_server_running(tmp_path: Path) -> None:
    """No descriptor left for a program's pipes: that launch fails, nothing leaks, the server
    runs the next one."""
    if os.getuid() != 0:
        pytest.skip("the server is not dumpable: only root may list its descriptors")
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], compiled_modules())
    request = (None, "print('hello')\nassert 1 + 1 == 2\n", None, LIMITS, 5.0)
    try:
        reply = server.launch(request)
        assert _passed(reply) and reply[4] == "hello\n", reply
        assert server.pid is not None
        fds = sorted(int(fd) for fd in os.listdir(f"/proc/{server.pid}/fd"))
        soft, hard = resource.prlimit(server.pid, resource.RLIMIT_NOFILE)
        # two more numbers: the first pipe is made, a later pipe or memory file is not
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (fds[-1] + 3, hard))
        with pytest.raises(LaunchFailed, match="no child could be made"):
            server.launch(request)
        assert server.alive()
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{server.pid}/fd")) == fds  # no leak
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (soft, hard))
        assert _passed(server.launch(request))
    finally:
        server.stop()
    assert not server.alive()


def test_a_child_that_cannot_be_set_up_says_why(tmp_path: Path) -> None:
    """The fork loop's child fails before the program (here: its folder is gone): the reason
    comes back on the failure channel, with exit status 70, and the server runs on."""
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path / "gone"), [],
                        compiled_modules())
    try:
        reply = server.launch((None, "assert True\n", None, LIMITS, 5.0))
        assert server.alive()
    finally:
        server.stop()
    assert reply[7] == b"chdir: No such file or directory"
    assert os.WIFEXITED(reply[0]) and os.WEXITSTATUS(reply[0]) == 70 and not _passed(reply)


def test_a_reply_larger_than_a_pipe_comes_whole(tmp_path: Path) -> None:
    """A full report pipe (64 KiB) and both output tails make a reply that the fork loop
    cannot write to its pipe at once: it comes whole, each part where it belongs."""
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], compiled_modules())
    source = ("import os, sys\nos.write(4, b'r' * 65536)\nprint('o' * 20000)\n"
              "sys.stderr.write('e' * 20000)\nassert False\n")
    try:
        reply = server.launch((None, source, None, LIMITS, 5.0))
        again = server.launch((None, "print('next')\nassert True\n", None, LIMITS, 5.0))
    finally:
        server.stop()
    assert reply[2] == b"r" * 65536
    assert reply[4] == "o" * 16383 + "\n"
    assert reply[5].startswith("e" * 100) and len(reply[5]) == 16384
    assert _passed(again) and again[4] == "next\n"


def test_the_fork_loop_forgets_a_program_once_read() -> None:
    """What a program printed and reported, its secrets, its sizes and its status are zeroed
    (``hm_forget``: after each reply, and after :meth:`Forker.launch`), as the next child is
    forked with that memory."""
    run = launcher._Run(report_size=3, failure_size=2, out_size=4, err_size=5, status=256,
                        timed_out=1, escaped=2, untouched=1)
    for name, size in (("report", 3), ("failure", 2), ("out", 4), ("err", 5)):
        ctypes.memmove(ctypes.addressof(run) + getattr(launcher._Run, name).offset, b"x" * size,
                       size)
    run.token[:] = [7] * len(run.token)
    assert run.part("out") == b"xxxx"
    launcher.fork_loop().forget(ctypes.addressof(run))
    assert (run.report_size, run.failure_size, run.out_size, run.err_size) == (0, 0, 0, 0)
    assert (run.status, run.timed_out, run.escaped, run.untouched) == (0, 0, 0, 0)
    assert not any(run.token)
    for name in ("report", "failure", "out", "err"):
        assert ctypes.string_at(ctypes.addressof(run) + getattr(launcher._Run, name).offset,
                                8) == bytes(8)


def test_the_token_sender_writes_only_in_its_own_process() -> None:
    """``send_token`` writes the secrets' first bytes in the process it is told of, and in
    another (one a program forked) sends nothing and says True; its type can neither be made
    nor changed (a program that reaches it can only lose its own pass)."""
    loop = launcher.fork_loop()
    secrets = ctypes.create_string_buffer(b"Tsecret", 64)
    read, write = os.pipe()
    try:
        assert loop.send_token(write, ctypes.addressof(secrets), 7, os.getpid() + 1) is True
        assert loop.send_token(write, ctypes.addressof(secrets), 7, os.getpid()) is True
        assert os.read(read, 64) == b"Tsecret"  # (the first call wrote nothing)
        os.close(read)
        assert loop.send_token(write, ctypes.addressof(secrets), 7, os.getpid()) is False
    finally:
        with contextlib.suppress(OSError):
            os.close(read)
        os.close(write)
    sender = type(loop.send_token)
    with pytest.raises(TypeError):
        sender()
    with pytest.raises(TypeError):
        sender.__call__ = lambda *args: True


def test_the_fork_loop_s_calls_check_their_arguments() -> None:
    loop = launcher.fork_loop()
    page = ctypes.create_string_buffer(64)
    loop.mark(ctypes.addressof(page), ord("S"))
    assert page.raw[:1] == b"S"
    for call, arguments in ((loop.mark, (ctypes.addressof(page), 256)),
                            (loop.read_token, (ctypes.addressof(page), -1)),
                            (loop.read_token, (0, 3)), (loop.key, (0,)),
                            (loop.serve, (ctypes.addressof(page), 0, 1 << 40)),
                            (loop.send_token, (1, ctypes.addressof(page), 1 << 20, 1))):
        with pytest.raises(ValueError):
            call(*arguments)
    with pytest.raises(TypeError):
        loop.mark(ctypes.addressof(page))


@pytest.mark.parametrize("found", ["nothing", "a library that is not the loop's module"])
def test_a_missing_fork_loop_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, found: str) -> None:
    """No library, or one built before the loop was a module (here: another extension)."""
    path = tmp_path / "_forkloop.abi3.so"
    if found != "nothing":
        other = getattr(_ctypes, "__file__", None)
        if other is None:
            pytest.skip("this Python's _ctypes is built in: no other extension file to copy")
        shutil.copy(other, path)
    monkeypatch.setattr(launcher, "FORK_LOOP", str(path))
    monkeypatch.setattr(launcher, "_forkloop", None)
    with pytest.raises(ImportError, match=r"not built.*pip install -e \..*C compiler"):
        launcher.fork_loop()


def test_a_server_that_dies_is_reported_and_stopped(tmp_path: Path) -> None:
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], compiled_modules())
    assert server.pid is not None
    os.kill(server.pid, 9)
    with pytest.raises(LauncherError, match="fork server failed"):
        server.launch((None, "pass\n", None, LIMITS, 5.0))
    assert server.pid is None and not server.alive()


def test_a_program_the_kernel_kills_at_its_hard_cpu_limit_reads_as_over_its_cpu_time(
        tmp_path: Path) -> None:
    """A program that ignores SIGXCPU (the soft limit's signal) runs on to the hard limit,
    where the kernel kills it (SIGKILL): its wait status reads as SIGXCPU, a timeout, not a
    crash. A program that kills itself with SIGKILL within its time stays killed."""
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], compiled_modules())
    one_second = (*LIMITS[:1], 1, *LIMITS[2:])
    try:
        ignores = ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                   "while True:\n    pass\n")
        status, timed_out, *_ = server.launch((None, ignores, None, one_second, 30.0))
        assert not timed_out and os.WIFSIGNALED(status), status
        assert os.WTERMSIG(status) == signal.SIGXCPU, status
        killed = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
        status, timed_out, *_ = server.launch((None, killed, None, one_second, 30.0))
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    finally:
        server.stop()


IN_PROCESS = f"""
import json, os, sys
from hybridmetric.sandbox.launcher import InProcess
forker = InProcess(None, None, {{"PATH": os.defpath}}, sys.argv[1], [])
found = []
for source in sys.argv[2:]:
    status, timed_out, report, token, stdout, stderr, escaped, failure, _ = forker.launch(
        (None, source, None, {LIMITS!r}, 5.0))
    found.append([os.waitstatus_to_exitcode(status), report == b"T" + token[:16], stderr,
                  failure])  # (the pass token: the first of the two secrets)
print(json.dumps(found, default=bytes.decode))
"""


def test_a_worker_without_a_fork_server_forks_its_programs_itself(tmp_path: Path) -> None:
    """Where no PID namespace can be made, the worker forks each program (``InProcess``): its
    child takes the program's streams itself, and makes itself the OOM killer's first choice."""
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(tmp_path),
         "import os\nassert open('/proc/self/oom_score_adj').read() == '1000\\n'\n"
         f"assert os.getcwd() == {str(tmp_path)!r}\n",
         "assert 1 + 1 == 3, 'arithmetic'\n"],
        capture_output=True, text=True, timeout=60, check=True)
    passes, fails = json.loads(done.stdout)
    assert passes == [0, True, "", ""], passes
    assert fails[:2] == [1, False] and fails[2].endswith("AssertionError: arithmetic\n"), fails


def test_a_preload_that_changes_warning_filters_keeps_compiling_in_the_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker compiles a program only where it compiles as in the server's child: with a
    preload that turns warnings into errors, it must not (a DeprecationWarning at compile time
    is then a syntax error)."""
    (tmp_path / "strict_preload.py").write_text("import warnings\nwarnings.simplefilter('error')\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the server gets the caller's import path
    strict = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), ["strict_preload"],
                        compiled_modules())
    try:
        assert not strict.compiles_here
        reply = strict.launch((None, "x = '\\d'\n", None, LIMITS, 20.0))
        assert reply[2] == b"S" + reply[3][:TOKEN_BYTES], reply  # the pass token after S
        assert "invalid escape sequence" in reply[5], reply
    finally:
        strict.stop()
    # from a process with the interpreter's own filters, as a worker has them (pytest's and
    # hybridmetric's imports change them; the worker imports neither)
    plain = (f"import os, sys\nsys.path.insert(0, {str(Path(launcher.__file__).parent)!r})\n"
             "from _boot import compiled_modules\nfrom launcher import ForkServer\n"
             f"server = ForkServer(None, None, {{'PATH': os.defpath}}, {str(tmp_path)!r}, [],"
             " compiled_modules())\n"
             "print(server.compiles_here)\nserver.stop()\n")
    done = subprocess.run([sys.executable, "-X", "no_debug_ranges", "-c", plain],
                          capture_output=True, text=True, check=True)
    assert done.stdout == "True\n", done


def test_a_preload_that_does_not_import_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(LauncherError, match="(?s)did not start.*no_such_module_xyz"):
        ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), ["no_such_module_xyz"],
                   compiled_modules())


@pytest.mark.parametrize("order", ["crossed", "high"])
def test_descriptors_land_in_place_and_nothing_else_stays_open(order: str) -> None:
    """``_install_fds`` puts each descriptor on its number, even where one's target is another
    one's source (the crossed case: they are moved up first), closes on exec from ``private``
    on, and closes everything else."""
    read_end, write_end = os.pipe()
    spare = os.open(os.devnull, os.O_RDONLY)
    pid = os.fork()
    if pid == 0:  # the child reports through its exit status: 0 when all is as it should be
        try:
            fds = [write_end, 0, spare] if order == "crossed" else [spare, write_end]
            identity = [os.fstat(fd)[1:3] for fd in fds]
            launcher._install_fds(fds, private=1)
            placed = [os.fstat(number)[1:3] for number in range(len(fds))]
            inheritable = [os.get_inheritable(number) for number in range(len(fds))]
            os.write(fds.index(write_end), b"ok")
            try:
                os.fstat(len(fds))
                others_closed = False
            except OSError:
                others_closed = True
            good = (placed == identity and inheritable == [True] + [False] * (len(fds) - 1)
                    and others_closed)
            os._exit(0 if good else 1)
        finally:
            os._exit(2)
    os.close(write_end)
    os.close(spare)
    try:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert os.read(read_end, 2) == b"ok"
    finally:
        os.close(read_end)


class Clock:
    """A ``time.monotonic`` that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_kill_rounds_bound_a_fork_bomb_but_wait_for_the_dying(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds that each find new processes are counted (a fork bomb must not outrun the kills
    without end); processes already killed may take their time to end, as long as one ends
    within DYING_S; none ending for longer is given up on."""
    clock = Clock()
    monkeypatch.setattr(launcher.time, "monotonic", clock)
    bomb = KillRounds(3)
    assert [bomb.wait(range(10 * n, 10 * n + 5)) for n in range(4)] == [0.001] * 3 + [None]

    dying = KillRounds(3)
    assert dying.wait(range(100)) == 0.001
    for left in range(99, 0, -1):  # one ends every DYING_S / 2: 50 times DYING_S in all
        clock.now += DYING_S / 2
        assert dying.wait(range(left)) == 0.01
    assert len(dying.seen) == 100

    stuck = KillRounds(3)
    stuck.wait([1, 2])
    clock.now += DYING_S
    assert stuck.wait([1, 2]) == 0.01
    clock.now += 1
    assert stuck.wait([1, 2]) is None

    joined = KillRounds(3)  # a new process counts as a round of the bomb's, not as an end
    joined.wait([1, 2])
    clock.now += DYING_S + 1
    assert joined.wait([1, 2, 3]) == 0.001


def test_a_failing_prctl_still_says_why() -> None:
    """The children's ``prctl`` goes around ctypes' errno copy (through it, a child paid about
    65 more page faults); a failure still carries its errno."""
    with pytest.raises(OSError) as failure:
        set_dumpable(5)  # type: ignore[arg-type]  # no such mode: EINVAL, nothing changes
    assert failure.value.errno == errno.EINVAL


#: Two functions that call each other 10,000 frames deep, then raise.
ALTERNATING = ("import sys\nsys.setrecursionlimit(30000)\ndef a(n):\n"
               "    if n == 5000: raise RecursionError(n)\n    return b(n)\n"
               "def b(n):\n    return a(n + 1)\n")
#: Failing programs whose error text must read as ``traceback.format_exception`` writes it.
TRACEBACKS = {
    "plain": "def f(x):\n    return [x][x] + 1\n\nf(1)\n",
    "assertion": "def check(c):\n    assert c(1) == 3, 'no ' * 2\n\ncheck(lambda x: x + 1)\n",
    "cause": "try:\n    1/0\nexcept Exception as e:\n    raise ValueError('v') from e\n",
    "context": "try:\n    {}['k']\nexcept KeyError:\n    int('x')\n",
    "suppressed": "try:\n    1/0\nexcept Exception:\n    raise ValueError('v') from None\n",
    "two_chained": ("def f():\n    raise KeyError('a')\ntry:\n    f()\nexcept KeyError as e:\n"
                    "    try:\n        raise TypeError('b') from e\n    except TypeError:\n"
                    "        raise IndexError('c')\n"),
    "cycle": ("try:\n    try:\n        1/0\n    except Exception:\n        raise ValueError()\n"
              "except ValueError as v:\n    v.__context__.__context__ = v\n    raise v\n"),
    "recursion": "def f(n):\n    if n == 50: raise RecursionError(n)\n    return f(n + 1)\nf(0)\n",
    "mutual_recursion": ("def a(n):\n    if n == 30: raise RecursionError(n)\n    return b(n)\n"
                         "def b(n):\n    return a(n + 1)\na(0)\n"),
    "four_repeats": "def f(n):\n    if n == 0: raise KeyError(n)\n    return f(n - 1)\nf(4)\n",
    "deep_recursion": ("import sys\nsys.setrecursionlimit(30000)\ndef f(n):\n"
                       "    if n == 20000: raise RecursionError(n)\n    return f(n + 1)\nf(0)\n"),
    # deeper than the sandbox writes (see launcher._stack_text): the tail it keeps is the same
    "alternating_deep": ALTERNATING + "a(0)\n",
    "alternating_deep_then_context": (ALTERNATING + "try:\n    a(0)\nexcept RecursionError:\n"
                                      "    raise ValueError('after')\n"),
    "context_then_alternating_deep": (ALTERNATING + "try:\n    1 / 0\n"
                                      "except ZeroDivisionError:\n    a(0)\n"),
    "one_code_two_globals": ("code = compile('def g(n):\\n    if n == 0: raise KeyError(n)\\n'\n"
                             "               '    return other(n - 1)\\n', 'mod.py', 'exec')\n"
                             "a, b = {'__name__': 'a'}, {'__name__': 'b'}\n"
                             "exec(code, a)\nexec(code, b)\n"
                             "a['other'], b['other'] = b['g'], a['g']\na['g'](5)\n"),
    "in_the_stdlib": "import json\njson.loads('{')\n",
    "class_of_a_module": "import json\nraise json.JSONDecodeError('m', 'doc', 0)\n",
    "nested_class": "class A:\n    class E(Exception): pass\nraise A.E('x')\n",
    "str_fails": "class E(Exception):\n    def __str__(self): raise RuntimeError\nraise E()\n",
    "empty_message": "raise ValueError('')\n",
    "carriage_returns": "x = 1\r\ny = 2\rraise ValueError(x)\r\n",
    "form_feed": "x = 1\x0c\nraise ValueError(x)  \n",
    "other_file": "exec(compile('raise ValueError(2)', '<made>', 'exec'))\n",
    "surrogates": "raise ValueError('\\u00e9\\udcff')\n",
    "notes": "e = ValueError('n')\ne.add_note('a note')\nraise e\n",
    "syntax_error_at_run_time": "eval('1 +')\n",
    "group": "raise ExceptionGroup('g', [ValueError(1), TypeError(2)])\n",
    # programs that probe how the text is made (found by a review)
    "str_subclass_message": ("class S(str):\n    def __format__(self, spec): return 'format'\n"
                             "    def __str__(self): return 'str'\n"
                             "class E(Exception):\n    def __str__(self): return S('orig')\n"
                             "raise E()\n"),
    "str_subclass_qualname": ("class S(str):\n    def __format__(self, spec): return 'F'\n"
                              "    def __str__(self): return 'S'\n"
                              "class E(Exception): pass\nE.__qualname__ = S('E')\n"
                              "raise E('m')\n"),
    "made_traceback": ("import sys, types\n"
                       "tb = types.TracebackType(None, sys._getframe(), 0, 99)\n"
                       "raise ValueError('made').with_traceback(tb)\n"),
    "from_a_zip": ("import os, sys, zipfile\nwith zipfile.ZipFile('z.zip', 'w') as z:\n"
                   "    z.writestr('zmod.py', 'def f():\\n    raise KeyError(1)\\n')\n"
                   "sys.path.insert(0, os.path.abspath('z.zip'))\nimport zmod\nzmod.f()\n"),
    "rewritten_module": ("import importlib, os, sys, traceback\nsys.path.insert(0, os.getcwd())\n"
                         "open('helper.py', 'w').write('def f():\\n    raise ValueError(1)\\n')\n"
                         "import helper\ntry:\n    helper.f()\nexcept ValueError:\n"
                         "    traceback.format_exc()\n"
                         "open('helper.py', 'w').write('def f():\\n    raise KeyError(2)\\n')\n"
                         "importlib.reload(helper)\nhelper.f()\n"),
    "str_sets_a_cause": ("class E(Exception):\n    def __str__(self):\n"
                         "        self.__cause__ = KeyError('cause')\n        return 'e'\n"
                         "raise E()\n"),
    "str_counts_its_calls": ("n = 0\nclass E(Exception):\n    def __str__(self):\n"
                             "        global n\n        n += 1\n        return str(n)\n"
                             "e = E()\ne.add_note('note')\nraise e\n"),
    "false_with_a_context": ("class E(Exception):\n    def __len__(self): return 0\n"
                             "try:\n    1/0\nexcept ZeroDivisionError:\n    raise E('x')\n"),
    "false_with_a_cause": ("class E(Exception):\n    def __bool__(self): return False\n"
                           "raise E('x') from KeyError(1)\n"),
    "bool_counts_its_calls": ("n = 0\nclass E(Exception):\n    def __bool__(self):\n"
                              "        global n\n        n += 1\n        return True\n"
                              "    def __str__(self): return str(n)\n"
                              "e = E()\ntry:\n    raise KeyError(1)\nexcept KeyError:\n"
                              "    try:\n        raise e\n    except E:\n"
                              "        raise ValueError('after')\n"),
    "notes_with_lines": ("e = ValueError('n')\ne.add_note('one\\ntwo')\ne.add_note('three')\n"
                         "raise e\n"),
    "notes_not_a_sequence": "e = ValueError('n')\ne.__notes__ = 42\nraise e\n",
    "notes_a_string": "e = ValueError('n')\ne.__notes__ = 'ab'\nraise e\n",  # (3.12: one note)
    "note_str_fails": ("class N:\n    def __str__(self): raise KeyError\n"
                       "e = ValueError('n')\ne.__notes__ = [N()]\nraise e\n"),
    "syntax_error_as_context": ("try:\n    compile('1 +', 'made', 'exec')\nexcept SyntaxError:\n"
                                "    raise KeyError(1)\n"),
    # a name not found: from 3.12 traceback says which is near, or which module to import
    "name_near_miss": "total = 1\ndef f():\n    return totl\nf()\n",
    "attribute_near_miss": "class A:\n    value = 1\nA().valeu\n",
    "module_not_imported": "math.sqrt(4)\n",
    "near_miss_and_module": "maths = 1\nmath.sqrt(4)\n",
    "import_near_miss": "from json import loadz\n",
    "str_adds_a_note": ("class E(Exception):\n    def __str__(self):\n"
                        "        if not hasattr(self, '__notes__'):\n"
                        "            self.add_note('a note')\n        return 'e'\nraise E()\n"),
}

if sys.version_info >= (3, 13):  # before, the traceback module itself fails on it
    TRACEBACKS["notes_unreadable"] = ("class E(Exception):\n    @property\n"
                                      "    def __notes__(self): raise KeyError('k')\n"
                                      "raise E('m')\n")

_REFERENCE = """
import io, json, linecache, sys, traceback
source, path = json.load(sys.stdin)
linecache.cache[path] = (len(source), None, io.StringIO(source, newline=None).readlines(), path)
try:
    exec(compile(source, path, "exec", dont_inherit=True), {"__name__": "__main__"})
except BaseException as exc:
    text = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
    print(json.dumps("".join(text)))
"""


@pytest.mark.parametrize("name", sorted(TRACEBACKS))
def test_error_text_is_the_traceback_module_s(tmp_path: Path, name: str) -> None:
    """Most exceptions are formatted without the ``traceback`` module (it costs a forked child
    ~75 copied pages); the text must be the one it writes, run by a fresh interpreter."""
    source = TRACEBACKS[name]
    path = str(tmp_path / "program.py")
    done = subprocess.run([sys.executable, "-B", "-X", "no_debug_ranges", "-c", _REFERENCE],
                          input=json.dumps([source, path]), capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    written = json.loads(done.stdout).encode("utf-8", "backslashreplace")  # as a child writes it
    expected = written[-launcher._TAIL:].decode("utf-8", "replace")  # the tail the server reads
    assert "Traceback (most recent call last):" in written.decode()
    assert 'File "<string>", line 6' not in expected  # the reference's own exec line
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], compiled_modules())
    try:
        code = precompile(source, path)
        assert not isinstance(code, str)
        reply = server.launch((None, source, code, LIMITS, 20.0))
    finally:
        server.stop()
    assert reply[2] == b"E" + reply[3][TOKEN_BYTES:]  # the report key, not the pass token
    assert reply[3][:TOKEN_BYTES] != reply[3][TOKEN_BYTES:]
    assert reply[5] == expected


def _with_marker(module: str, marker: Path) -> int:
    """A memory file as :func:`compiled_modules` makes, in which ``module``'s code also
    creates ``marker`` when imported."""
    modules = Compiled(compiled_modules()).modules
    path = modules[f"hybridmetric.sandbox.{module}"][0]
    source = Path(path).read_text() + f"\nopen({str(marker)!r}, 'w').close()\n"
    modules[f"hybridmetric.sandbox.{module}"] = (path, marshal.dumps(compile(source, path, "exec")))
    fd = os.memfd_create("marked")
    os.write(fd, marshal.dumps(modules))
    return fd


def test_the_sandbox_s_modules_are_compiled_once_into_a_sealed_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fd = compiled_modules()
    assert compiled_modules() == fd  # once
    assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE
    with pytest.raises(PermissionError):
        os.pwrite(fd, b"x", 0)
    finder = Compiled(fd)
    assert set(finder.modules) == {f"hybridmetric.sandbox.{name}" for name in WORKER_MODULES}
    path, code = finder.modules["hybridmetric.sandbox.limits"]
    assert path == os.path.realpath(limits.__file__)
    assert marshal.loads(code) == compile(Path(path).read_bytes(), path, "exec")
    assert finder.find_spec("json") is None
    spec = finder.find_spec("hybridmetric.sandbox.limits")
    assert spec is not None and spec.loader is finder
    module = importlib.util.module_from_spec(spec)
    finder.exec_module(module)
    assert module.__file__ == path and module.Limits(timeout_s=2).timeout_s == 2
    # made from sources that have changed since: made again, and the old file closed
    stale = os.dup(fd)
    monkeypatch.setattr(_boot, "_made", ((("elsewhere.py", 0, 0),), stale))
    fresh = compiled_modules()
    assert fresh != stale and Compiled(fresh).modules.keys() == finder.modules.keys()
    with pytest.raises(OSError):
        os.fstat(stale)
    os.close(fresh)


def test_a_fork_server_imports_launcher_from_the_compiled_file(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    code = _with_marker("launcher", marker)
    try:
        server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [], code)
        server.stop()
    finally:
        os.close(code)
    assert marker.exists()


def test_a_worker_imports_the_sandbox_from_the_compiled_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported"
    code = _with_marker("worker", marker)
    monkeypatch.setattr(pool, "compiled_modules", lambda: code)
    try:
        with Sandbox(workers=1) as box:
            [result] = box.run([Program("python", "assert 1 + 1 == 2\n")])
    finally:
        os.close(code)
    assert marker.exists() and result.outcome == PASSED


FRAGMENTED = """
import json, sys
from hybridmetric.sandbox import launcher
kept = [bytes(15) for _ in range(20000)]  # 48-byte blocks
del kept[::2]  # every other one free: holes all over those pools
before = launcher._pool_vacancies()
fillers = launcher._fill_pools()
print(json.dumps([before, launcher._pool_vacancies(), len(fillers)]))
"""


def test_the_pools_free_blocks_are_filled_before_any_fork() -> None:
    """What a child allocates goes to fresh pools, not to free blocks scattered over the heap
    it shares: after ``_fill_pools`` each size class has at most one pool's worth of free blocks
    (16 KiB; and a few the last round's own objects freed)."""
    done = subprocess.run([sys.executable, "-c", FRAGMENTED], capture_output=True, text=True,
                          timeout=60, check=True)
    before, after, fillers = json.loads(done.stdout)
    assert before["48"] >= 10000 and fillers >= 10000, (before, fillers)
    assert all(free <= 16384 // int(size) + 8 for size, free in after.items()), after


def test_without_the_small_object_allocator_nothing_is_filled() -> None:
    done = subprocess.run([sys.executable, "-c", FRAGMENTED], capture_output=True, text=True,
                          timeout=60, check=True, env={**os.environ, "PYTHONMALLOC": "malloc"})
    assert json.loads(done.stdout) == [{}, {}, 0]


def test_a_forking_process_holds_the_numbers_its_children_install_descriptors_on() -> None:
    """So a child's descriptors are never among their targets (``_install_fds`` need not move
    them first): after a Forker is made, 0 to FAILURE_FD are open and a new pipe lands above."""
    script = ("import os, sys\nfor fd in range(3, 16):\n    try:\n        os.close(fd)\n"
              "    except OSError:\n        pass\n"
              "from hybridmetric.sandbox.launcher import FAILURE_FD, InProcess\n"
              "InProcess(None, None, {'PATH': os.defpath}, sys.argv[1], [])\n"
              "os.fstat(FAILURE_FD)\nprint(min(os.pipe()) > FAILURE_FD)\n")
    done = subprocess.run([sys.executable, "-c", script, "/"], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout == "True\n", done.stderr
