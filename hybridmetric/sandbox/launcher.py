"""Starting one program: the isolated child, and the fork server that makes it.

A program runs in a forked child that takes its own session, its descriptors (stdin from
``/dev/null``, stdout and stderr into memory files, the token on fd 3, the report on fd 4, and
on fd 5, closed before the program starts, why the sandbox failed if it did), its
working directory, rlimits and uid, then either runs Python source in the forked interpreter or
``execve``\\ s a command. :meth:`Forker.launch` forks it, waits with a wall-clock limit, kills its
group on timeout and returns what it left: exit status, report, output tails. What happens in
the forking process for each program, and in the child until its program's own Python or
``execve``, is C (``_forkloop.c``, a module of builtins): a Python loop wrote ~100 more pages
between forks, each a fault once the next fork has shared it, and a child copied the pages its
Python setup wrote (and the pages of ctypes' own objects, for each call through ctypes); only
what is rare (a timeout, processes a program left) comes back to Python. A Python program
is compiled by the worker where that leaves nothing behind (``compiling.py``; the part that
programs share, a task's tests, once for them all), which sends the code for the child to load:
a program that does not compile needs no child at all, and neither the compiler's memory nor
the program's code is ever in the forking process (each fork write-protects its pages: every
page written after it costs a fault; and code loaded there would leave its interned
identifiers behind, from Python 3.12 on, for later programs to find).

As root the worker keeps a *fork server* (:class:`ForkServer`): a fresh interpreter started
inside the worker's namespaces that imports only this file, the standard modules programs use
most and the study's preloads, then forks every program. Its heap stays small (a fork copies
fewer page tables, a child's exit frees fewer) and it does almost nothing between forks (each
fork write-protects the forking process's pages, so every page it then writes costs a fault);
the worker's own bookkeeping (requests, verdicts, sweeps) runs in a process that never forks a
program. Programs run under another uid and can neither signal, trace nor read the server (what
they make its children with ``clone(CLONE_PARENT)`` it kills after each program). Without root
they share its uid, so the server is the init of their PID namespace, whose signals they cannot
send (the kernel drops them), and which, not dumpable, they cannot trace or read; the worker
checks what they could still change (:func:`process_settings`) after each program. Where no PID
namespace can be made, the worker forks programs itself (:class:`InProcess`).

This module uses the standard library only: with ``_boot.py`` and the fork loop
(``_forkloop.c``, which ``pip install`` compiles), it is the fork server's whole program.
"""

from __future__ import annotations

import builtins
import collections.abc
import contextlib
import ctypes
import gc
import importlib
import io
import itertools
import linecache
import marshal
import mmap
import os
import re
import resource
import select
import signal
import struct
import sys
import time
import traceback
import warnings

# What a forked child calls from ``atexit``, ``builtins``, ``marshal``, ``os`` and ``resource``,
# it calls by name (``setsid()``, not ``os.setsid()``): that code runs once in each child, never
# specialised, and each attribute lookup there writes the reference count of the attribute's
# name, a page the child copies (about 30 fewer page faults a child, a few microseconds each).
# The names are this module's own, so a program that patches ``os``, ``atexit`` or ``builtins``
# (``mock.patch("os._exit")``, ``builtins.exec = ...`` before its shared tail runs) does not
# reach what its harness calls; nor, rebinding ``builtins.BaseException`` and the like, what it
# catches (the program's failure still gets its verdict, not an escape through the frames of the
# fork server that made it).
from atexit import _run_exitfuncs
from builtins import (
    BaseException,
    EOFError,
    Exception,
    MemoryError,
    SystemExit,
    TypeError,
    ValueError,
)
from builtins import exec as run_code
from collections.abc import Callable, Collection, Sequence
from importlib.machinery import ExtensionFileLoader, ModuleSpec, SourceFileLoader
from marshal import loads as unmarshal
from os import (
    _exit,
    close,
    closerange,
    dup2,
    getpid,
    setgroups,
    setresgid,
    setresuid,
    write,
)
from sys import setprofile, settrace
from types import CodeType, FrameType, ModuleType, TracebackType
from typing import Any, AnyStr, NoReturn, TextIO

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
#: Modules every fork server imports, because generated programs import them most (a module
#: imported in a child costs that child its whole import). Not ``random``: it reseeds itself in
#: every forked child (``os.register_at_fork``), which costs each child ~0.1 ms whether it uses
#: ``random`` or not, and few programs do (1 of 2,164 in ``analysis/bench_sandbox.py``).
STANDARD_MODULES = ("typing", "math", "re", "collections", "itertools", "functools",
                    "string", "heapq", "bisect", "copy")
#: Failing programs the fork server runs in itself before it forks any (see :func:`_rehearse`):
#: an assertion that fails on a whole line, and an error inside an expression (a caret line).
_REHEARSALS = ("def check(candidate):\n    assert candidate(1) == 3\n\ncheck(lambda x: x + 1)\n",
               "def f(x):\n    return [x][x] + 1\n\nf(1)\n")
_TAIL = 16384
#: The interpreter's own ``sys.excepthook``: a program that set another has its errors written
#: by that one.
_PYTHON_EXCEPTHOOK = sys.__excepthook__
#: ``unittest.main``'s file, as a traceback names it.
_UNITTEST_MAIN = os.path.join("unittest", "main.py")
#: What ``compile`` raises for a program that is not valid Python (ValueError: NUL bytes;
#: RecursionError: an expression nested too deep to compile, how deep depending a little on the
#: depth of the calling stack: ``compiling.precompile`` leaves those to the child).
COMPILE_ERRORS = (SyntaxError, ValueError, UnicodeError, RecursionError)
#: The file a Python program runs as, in its working directory (the worker writes it there).
PROGRAM = "program.py"
#: Whether python starts ``__main__`` with an empty ``__annotations__``: up to 3.13 (from 3.14
#: a module's annotations are made when first asked for, PEP 649).
MAIN_ANNOTATIONS = sys.version_info < (3, 14)
#: Interpreter options of every process that forks Python programs (the worker, the fork
#: server): tracebacks without column markers, whose computation (parsing each quoted line
#: again) cost a failing program about 0.2 ms.
INTERPRETER_OPTIONS = ("-X", "no_debug_ranges")
#: Seconds the worker waits for the fork server beyond a program's own time limit.
GRACE_S = 10.0
STARTUP_TIMEOUT_S = 120.0

libc = ctypes.CDLL(None, use_errno=True)
#: The C library without ctypes' errno swapping (``libc``'s copies errno to and from a
#: per-thread copy of ctypes' own around each call): ``errno`` as the library left it.
_plain_libc = ctypes.CDLL(None)
_prctl = _plain_libc.prctl
_errno_location = _plain_libc.__errno_location
_errno_location.restype = ctypes.POINTER(ctypes.c_int)
_c_mmap = _plain_libc.mmap
_c_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                    ctypes.c_long)
_c_mmap.restype = ctypes.c_void_p
_c_madvise = _plain_libc.madvise
_c_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
#: ``madvise``'s advice that a mapping's pages reach a forked child empty (linux/mman.h; Linux
#: 4.14); not in every build's ``mmap`` module.
MADV_WIPEONFORK = 18
#: The bytes of each of a program's two secrets (random): its *pass token*, which its harness
#: sends after ``T`` once the tests completed (Python's after ``S`` where the program does not
#: compile), and its *report key*, which the harness sends after any other report (``M``: out
#: of memory; Python's ``X``, ``E``). The token pipe
#: (fd 3) holds the one, then the other (no harness reads more than 64 bytes). Two, because a
#: program can make its harness send a report it did not earn a pass with (an exception that it
#: then hides from the tests), and can read back what went into its own report pipe (it opens
#: ``/proc/self/fd/4`` for reading: the pipe is its uid's): what it reads there is a key that
#: authenticates no pass.
TOKEN_BYTES = 16
#: Where the two are, in memory that no Python object owns or shows (a page mapped once here,
#: which every fork gives the child empty: ``MADV_WIPEONFORK``): ``T`` and the pass token, then
#: a byte that nothing reads and the report key. The forking process draws both into it before
#: each fork and sends them on the token pipe from there; a Python child reads its token from
#: the pipe into its own page and writes ``T`` and the token to fd 4 in one ``write`` from
#: there, so a program that walks the frames below its own (``sys._getframe(1).f_locals``) or
#: searches what the collector tracks does not find the token (only reading its process's
#: memory would), and a process that the program forks holds none to send. (The report key,
#: which authenticates no pass, a Python child is given as bytes.)
_TOKEN_AT: int = _c_mmap(None, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0) or 0
if _TOKEN_AT in (0, ctypes.c_void_p(-1).value):
    raise MemoryError("no memory for the programs' token")
if _c_madvise(_TOKEN_AT, mmap.PAGESIZE, MADV_WIPEONFORK) != 0:
    raise OSError(_errno_location()[0], "the programs' token needs MADV_WIPEONFORK "
                                        "(Linux 4.14 or later)")

#: The fork loop (``_forkloop.c``), which ``pip install`` builds beside this file: one module for
#: every Python 3 from 3.11 (abi3). Loaded by :class:`Forker`, where a process is to fork programs.
FORK_LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_forkloop.abi3.so")
#: The fork loop's module, once :func:`fork_loop` loaded it.
_forkloop: ModuleType | None = None
#: What the fork loop's calls return (``_forkloop.c``).
_END, _CHILD, _DONE, _ATTEND, _FAILED, _BROKEN = range(1, 7)
#: A request to the fork server: payload bytes, wall-clock limit, a command or not, where the
#: code starts in the payload (-1: none), the rlimits (:data:`Rlimits`); then the payload, which
#: only the child reads: (argv, source) marshalled, then the code (``compiling.precompile``'s).
_REQUEST = struct.Struct("<Qdqq6q")
#: The fork server's reply: _DONE (or _FAILED: no child, the status is the errno), wait
#: status, timed out, processes the program left, fd 3 untouched, then the bytes of the report,
#: the failure, stdout's tail and stderr's, and the two secrets; those bytes follow.
_REPLY = struct.Struct("<6i4q32s")


class _Run(ctypes.Structure):
    """One program's run in the fork loop (``struct hm_run`` in ``_forkloop.c``)."""

    _fields_ = [("timeout_s", ctypes.c_double), ("command", ctypes.c_int64),
                ("rlimits", ctypes.c_int64 * 6), ("code_at", ctypes.c_int64),
                ("mapped", ctypes.c_int64), ("work", ctypes.c_char_p),
                ("seccomp", ctypes.c_void_p), ("cgroup_procs", ctypes.c_int32),
                ("uid", ctypes.c_int32), ("children", ctypes.c_int32), ("pidfd", ctypes.c_int32),
                ("secrets", ctypes.c_void_p), ("fds", ctypes.c_int32 * 6),
                ("report_r", ctypes.c_int32), ("failure_r", ctypes.c_int32),
                ("pid", ctypes.c_int32), ("status", ctypes.c_int32),
                ("timed_out", ctypes.c_int32), ("reaped", ctypes.c_int32),
                ("escaped", ctypes.c_int32), ("untouched", ctypes.c_int32),
                ("error", ctypes.c_int32), ("key", ctypes.c_ubyte * TOKEN_BYTES),
                ("token", ctypes.c_ubyte * (2 * TOKEN_BYTES)), ("payload", ctypes.c_void_p),
                ("payload_size", ctypes.c_uint64), ("payload_room", ctypes.c_uint64),
                ("report_size", ctypes.c_int64), ("failure_size", ctypes.c_int64),
                ("out_size", ctypes.c_int64), ("err_size", ctypes.c_int64),
                ("report", ctypes.c_char * 65536), ("failure", ctypes.c_char * 4096),
                ("out", ctypes.c_char * _TAIL), ("err", ctypes.c_char * _TAIL)]

    def part(self, name: str) -> bytes:
        """What the loop left in the buffer ``name`` (``report``, ``failure``, ``out``,
        ``err``): its first ``NAME_size`` bytes."""
        return ctypes.string_at(ctypes.addressof(self) + getattr(_Run, name).offset,
                                getattr(self, f"{name}_size"))


def fork_loop() -> ModuleType:
    """The fork loop's module (its calls take the address of a :class:`_Run`), loaded once, from
    :data:`FORK_LOOP`, without its package (which a worker and its fork server never import);
    ImportError, saying how to build it, where it was not built."""
    global _forkloop
    if _forkloop is None:
        loader = ExtensionFileLoader("hybridmetric.sandbox._forkloop", FORK_LOOP)
        try:
            module = loader.create_module(ModuleSpec(loader.name, loader, origin=FORK_LOOP))
            loader.exec_module(module)
        except ImportError as exc:  # (or built before it was a module: no PyInit__forkloop)
            raise ImportError(
                f"the sandbox's fork loop is not built ({exc}): install hybridmetric with pip "
                f"(`pip install -e .` in its folder), which compiles "
                f"hybridmetric/sandbox/_forkloop.c with the machine's C compiler (gcc or clang)"
            ) from exc
        # (loading put it in sys.modules: out again, as programs forked here must find there
        # what python gives them)
        if sys.modules.get(loader.name) is module:
            del sys.modules[loader.name]
        _forkloop = module
    return _forkloop


#: (memory bytes, CPU seconds, file bytes, open files, processes, address space bytes): a
#: child's rlimits, 0 for no memory (RLIMIT_DATA) or address space limit. The address space is
#: what a program may map: an executed command's whole, a forked Python's beyond the mappings
#: it starts with (its forking process's, once warm).
Rlimits = tuple[int, int, int, int, int, int]
#: (argv, or None for the Python source; the source; its code from ``compiling.precompile``, or None
#: for the child to compile; rlimits; wall-clock limit in seconds).
Request = tuple[list[str] | None, str | None, bytes | None, Rlimits, float]
#: (wait status, timed out, what came on fd 4, the secrets, stdout tail, stderr tail, processes
#: the program left as the fork server's children, killed: always 0 in the worker itself; why the
#: sandbox failed before the program started, or b"": see :data:`FAILURE_FD`; whether fd 3 still
#: held the secrets as sent, for a command: no harness took them, so the runtime never started
#: its harness; False for a Python program).
Reply = tuple[int, bool, bytes, bytes, str, str, int, bytes, bool]
#: Where a child finds its program's secrets (a pipe): each harness reads them and closes the
#: descriptor before the program runs, so that no program can read them there and send one early.
TOKEN_FD = 3
#: The child's channel for the sandbox's own failure before the program starts: closed before a
#: Python program runs and on exec, so that no program can write there (a sandbox error stops a
#: whole scoring run).
FAILURE_FD = 5


class LauncherError(OSError):
    """The fork server failed (died, stopped answering, or could not start)."""


class NoAnswerInTime(LauncherError):
    """The other end of a pipe sent no whole message within the time given (see
    :func:`read_message`)."""


class LaunchFailed(OSError):
    """No child could be made for a program (no memory or descriptors left); nothing ran."""


def check(result: int, what: str, errno_of: Callable[[], int] = ctypes.get_errno) -> None:
    """Raise OSError (with errno, from ``errno_of``) when a libc call returned nonzero."""
    if result != 0:
        code = errno_of()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _plain_errno() -> int:
    """errno as the C library left it (for calls through :data:`_prctl`)."""
    return _errno_location()[0]


def set_dumpable(dumpable: bool) -> None:
    """A process that is not dumpable cannot be traced, nor its ``/proc`` memory and file
    descriptors opened, by other processes of its uid."""
    check(_prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0), "prctl(DUMPABLE)", _plain_errno)


class SeccompProgram(ctypes.Structure):
    """A seccomp filter as ``prctl(PR_SET_SECCOMP)`` takes it (``struct sock_fprog``), made
    from its instructions (:func:`isolation.memory_file_filter`), which it holds."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    def __init__(self, instructions: bytes):
        self.instructions = ctypes.create_string_buffer(instructions, len(instructions))
        super().__init__(len(instructions) // 8, ctypes.addressof(self.instructions))


def drop_privileges(uid: int | None) -> None:
    """Become the sandbox uid (gid = uid, no supplementary groups)."""
    if uid is None:
        return
    setgroups([])
    setresgid(uid, uid, uid)
    setresuid(uid, uid, uid)


def program_signals() -> None:
    """The signal dispositions a Python program starts with, as python sets them: SIGPIPE
    ignored (a write to a pipe nobody reads raises BrokenPipeError), SIGINT raises
    KeyboardInterrupt, and a write past RLIMIT_FSIZE fails with EFBIG instead of killing the
    program (SIGXFSZ ignored). A program of another language, which the child execs, gets SIGPIPE's
    default back (it kills, as in any process but Python's); exec turns SIGINT's handler back
    to the default. SIGXFSZ stays ignored (node and the JVM ignore it themselves): a C++
    program that writes past the limit loses that output (which the sandbox would cut anyway)
    but runs on, as it would with no limit."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def write_message(fd: int, message: Any) -> None:
    """Send one message (``marshal``: strings, bytes, numbers, tuples, lists, dicts)."""
    data = marshal.dumps(message)
    _write_all(fd, len(data).to_bytes(8, "little") + data)


def read_message(fd: int, timeout_s: float | None = None) -> Any:
    """Receive one message, the only one in flight (the worker's requests, its fork server's
    config: see :class:`MessageReader` for replies that come back to back); raise LauncherError
    at end of file or where more came, NoAnswerInTime when the whole message has not come
    within ``timeout_s``."""
    reader = MessageReader(fd)
    message = reader.read(timeout_s)
    if reader.kept:
        raise LauncherError("more than one message in flight")
    return message


#: What a worker says once it has compiled a batch of programs, before it runs them.
BATCH_COMPILED = "compiled"


class MessageReader:
    """Messages from ``fd`` (:func:`write_message`) where several may come back to back (a
    worker's replies to a batch): what one read gets past a message is kept for the next."""

    def __init__(self, fd: int):
        self.fd = fd
        self._kept = b""

    @property
    def kept(self) -> int:
        """Bytes read past the last message, kept for the next."""
        return len(self._kept)

    def read(self, timeout_s: float | None = None) -> Any:
        """The next message; LauncherError at end of file, NoAnswerInTime when it has not all
        come within ``timeout_s`` (what came of it is kept for the next call)."""
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        chunks, have = [self._kept], len(self._kept)
        try:
            while have < 8:
                chunks.append(_read_some(self.fd, 1 << 16, deadline))
                have += len(chunks[-1])
            chunks = [b"".join(chunks)]
            end = 8 + int.from_bytes(chunks[0][:8], "little")
            while have < end:
                chunks.append(_read_some(self.fd, max(1 << 16, min(end - have, 1 << 20)),
                                         deadline))
                have += len(chunks[-1])
        finally:
            self._kept = b"".join(chunks) if len(chunks) > 1 else chunks[0]
        data, self._kept = self._kept, self._kept[end:]
        return marshal.loads(memoryview(data)[8:end])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    """``size`` bytes from ``fd``; NoAnswerInTime when they have not all come by ``deadline``
    (``time.monotonic``), LauncherError at end of file."""
    chunks = []
    while size > 0:
        chunks.append(_read_some(fd, min(size, 1 << 20), deadline))
        size -= len(chunks[-1])
    return b"".join(chunks)


def _read_reply(fd: int, deadline: float) -> tuple[tuple[Any, ...], bytes]:
    """The fork server's reply: its header (:data:`_REPLY`) and the bytes of its parts, which
    one read gets with it unless they are large; NoAnswerInTime when it has not all come by
    ``deadline``, LauncherError at end of file or where more came than one reply."""
    data = _read_some(fd, 1 << 16, deadline)  # (a larger buffer is mapped and unmapped)
    while len(data) < _REPLY.size:
        data += _read_some(fd, _REPLY.size - len(data), deadline)
    head = _REPLY.unpack_from(data)
    left = _REPLY.size + sum(head[6:10]) - len(data)
    if left < 0:
        raise LauncherError("more than one reply in flight")
    return head, data[_REPLY.size:] + _read_exactly(fd, left, deadline)


def _split(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    """``data`` cut into parts of ``sizes`` bytes."""
    parts, at = [], 0
    for size in sizes:
        parts.append(data[at:at + size])
        at += size
    return parts


def _read_some(fd: int, size: int, deadline: float | None) -> bytes:
    if deadline is not None and not select.select(
            [fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        raise NoAnswerInTime("no answer came in time")
    chunk = os.read(fd, size)
    if not chunk:
        raise LauncherError("the other end closed the pipe")
    return chunk


def _install_fds(fds: Sequence[int], private: int | None = None) -> None:
    """Put ``fds`` on 0, 1, 2, ... and close everything else; from number ``private`` on, they
    close on exec."""
    if min(fds) < len(fds):  # one would be overwritten before it is copied: move them up first
        # (above them all: what they replace is closed below anyway; no ``fcntl``, whose
        # library would be five more mappings for every fork to copy)
        top = max(fds) + 1
        fds = [dup2(fd, top + index) for index, fd in enumerate(fds)]
    for number, fd in enumerate(fds):
        # (inheritable, by position: the first call that names an argument sets up the
        # function's keyword parser, some ten more pages for each child to copy)
        dup2(fd, number, private is None or number < private)
    closerange(len(fds), 1 << 20)


def _program_streams() -> tuple[TextIO, TextIO, TextIO]:
    """A Python program's stdin, stdout and stderr: fds 0, 1, 2 as the child will have them,
    as python makes them under the programs' ``LANG=C.UTF-8`` (UTF-8; what it cannot encode or
    decode escaped as lone surrogates, on stderr with backslashes), named as python names them
    (``<stdout>``). Made once in the forking process (which never uses them), so that a fork
    need not."""
    streams = (open(0, encoding="utf-8", errors="surrogateescape",  # noqa: SIM115 - /dev/null
                    closefd=False),
               open(1, "w", encoding="utf-8", errors="surrogateescape",  # noqa: SIM115
                    closefd=False),
               open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                    closefd=False, buffering=1))
    for stream, name in zip(streams, ("<stdin>", "<stdout>", "<stderr>"), strict=True):
        stream.buffer.raw.name = name
    return streams


def _mapped_bytes() -> int:
    """The address space this process maps (its ``VmSize``)."""
    with open("/proc/self/statm", "rb") as handle:
        return int(handle.read().split(None, 1)[0]) * resource.getpagesize()


def _error_text(exc: BaseException, source: str, path: str) -> str:
    """The traceback of a program's exception, without the harness's frame, as
    ``traceback.format_exception`` writes it (under ``-X no_debug_ranges``: no column markers);
    the lines of ``path`` come from the source the program ran (no file to read, and what ran
    even if it rewrote it). Most exceptions take :func:`_plain_error_text`; syntax errors and
    exception groups take the ``traceback`` module, with ``linecache`` left as it was found (a
    later program may look)."""
    plain = _plain_error_text(exc, source, path)
    if plain is not None:
        return plain
    linecache.cache[path] = (len(source), None, _lines(source), path)
    frames = exc.__traceback__.tb_next if exc.__traceback__ else None
    try:
        return "".join(traceback.format_exception(type(exc), exc, frames))
    finally:
        linecache.cache.pop(path, None)


def _lines(source: str) -> list[str]:
    """The lines of ``source`` as the compiler splits them (no form feed or Unicode line
    separator breaks a line), ends kept, as ``linecache`` holds them."""
    return io.StringIO(source, newline=None).readlines()


#: What changed in ``traceback``'s last lines of an exception: from Python 3.12 a ``__notes__``
#: that is a ``str`` or ``bytes`` is one note, not a sequence of them, and one that is not a
#: sequence ends its line; from 3.13 the type's name is formatted (``format``, not ``str``), and
#: a ``__notes__`` that cannot be read becomes a note that says so.
_PY312, _PY313 = sys.version_info >= (3, 12), sys.version_info >= (3, 13)
#: What ``traceback`` writes between chained exceptions.
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
#: Identical consecutive frames ``traceback`` shows before it counts the rest.
_REPEATS_SHOWN = 3
#: Runs of equal frames an error text shows at most (see _stack_text): each is a line of 23
#: bytes or more (``  File "", line 0, in`` and its newline), so that these fill the tail kept.
_KEPT_RUNS = _TAIL // len('  File "", line 0, in \n') + 1


def _plain_error_text(exc: BaseException, source: str, path: str) -> str | None:
    """What ``traceback.format_exception`` writes for ``exc`` (less the harness's frame), by
    its steps in its order (so a program's ``__str__``, ``__bool__`` and the like run as, and as
    often as, they would there), touching far fewer of the objects a forked child shares with
    its parent (each page it writes is a page copied); None when the ``traceback`` module is
    needed: a syntax error or an exception group among the chained exceptions (looked for
    before any of the program's code runs), or a ``sys.tracebacklimit``. Of a stack too deep
    for the tail of stderr the sandbox keeps, only the end that fills it (see
    :func:`_stack_text`)."""
    if hasattr(sys, "tracebacklimit") or _needs_traceback(exc):
        return None
    program: list[str] = []  # the source's lines, split when first needed
    found: list[tuple[BaseException, tuple[list[str], bool], str, object, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    while current is not None:  # as TracebackException(..., compact=True) takes it in
        seen.add(id(current))
        stack = _stack_text(tb, source, path, program)
        text = _safe_str(current, "exception")
        try:
            notes = getattr(current, "__notes__", None)
        except Exception as error:
            if not _PY313:
                raise
            notes = [f"Ignored error getting __notes__: {_safe_str(error, '__notes__', repr)}"]
        if isinstance(current, SyntaxError):  # (possible only if the program's code made it so)
            return None
        suggestion = _suggestion(current, tb) if _PY312 else ""
        if suggestion:  # (else text stays what __str__ gave: a str subclass's own)
            text += suggestion
        following, introduces = None, ""
        if current and current.__cause__ is not None and id(current.__cause__) not in seen:
            following, introduces = current.__cause__, _CAUSE
        context_wanted = following is None and not current.__suppress_context__
        if (current and current.__context__ is not None and context_wanted
                and id(current.__context__) not in seen):
            following, introduces = current.__context__, _CONTEXT
        if current and isinstance(current, BaseExceptionGroup):
            return None
        found.append((current, stack, text, notes, introduces))
        current = following
        tb = current.__traceback__ if current is not None else None
    out: list[str] = []
    for current, (stack, cut), text, notes, introduces in reversed(found):  # as format() writes
        if cut:  # what comes before its stack is not in the tail kept (see _stack_text)
            out = stack
        else:
            out.append(introduces)
            if stack:
                out.append("Traceback (most recent call last):\n")
                out += stack
        kind = type(current)
        stype, smod = kind.__qualname__, kind.__module__
        if smod not in ("__main__", "builtins"):
            if not isinstance(smod, str):
                smod = "<unknown>"
            stype = smod + "." + stype
        valuestr = _safe_str(text, "exception")
        if _PY313:
            out.append(f"{stype}: {valuestr}\n" if valuestr else f"{stype}\n")
        else:
            out.append("%s: %s\n" % (stype, valuestr) if valuestr else "%s\n" % stype)  # noqa: UP031
        if notes is None:  # (most often: no need to ask the ABC, whose caches it would write)
            continue
        if isinstance(notes, collections.abc.Sequence) and not (
                _PY312 and isinstance(notes, str | bytes)):
            for note in notes:
                out += [line + "\n" for line in _safe_str(note, "note").split("\n")]
        else:
            out.append(_safe_str(notes, "__notes__", repr) + ("\n" if _PY312 else ""))
    return "".join(out)


def _suggestion(exc: BaseException, tb: TracebackType | None) -> str:
    """What ``traceback`` (from Python 3.12) adds to the message of a name not found: the
    nearest name there is (``. Did you mean: 'total'?``), a standard module not imported; by
    its steps in its order. (Python 3.11's ``traceback`` adds nothing, as its interpreter's own
    printer does.)"""
    kind = type(exc)
    if issubclass(kind, ImportError) and getattr(exc, "name_from", None) is not None:
        wrong = getattr(exc, "name_from", None)
        near = traceback._compute_suggestion_error(exc, tb, wrong)  # type: ignore[attr-defined]
        return f". Did you mean: '{near}'?" if near else ""
    if not (issubclass(kind, NameError | AttributeError)
            and getattr(exc, "name", None) is not None):
        return ""
    wrong = getattr(exc, "name", None)
    near = traceback._compute_suggestion_error(exc, tb, wrong)  # type: ignore[attr-defined]
    text = f". Did you mean: '{near}'?" if near else ""
    if issubclass(kind, NameError):
        wrong = getattr(exc, "name", None)
        if wrong is not None and wrong in sys.stdlib_module_names:
            asked = f"forget to import '{wrong}'" + ("?" if _PY313 else "")
            text += f" Or did you {asked}" if near else f". Did you {asked}"
    return text


#: The module of numpy's global generator (``np.random.rand``, pandas' ``sample``), which draws
#: its seed from the system's entropy as it is imported.
_NUMPY_GLOBAL_GENERATOR = "numpy.random.mtrand"


def _reseed_numpy() -> None:
    """Seed numpy's global generator afresh in a forked child: imported by a preload in the
    fork server, it would give every program the same numbers, where each run of ``python``
    draws its own (Python's ``random`` reseeds itself so)."""
    sys.modules[_NUMPY_GLOBAL_GENERATOR].seed()


def _needs_traceback(exc: BaseException) -> bool:
    """Whether a syntax error or an exception group is among the exceptions chained to
    ``exc`` (any cause or context, shown or not: the ``traceback`` module writes the same text
    anyway)."""
    seen: set[int] = set()
    waiting: list[BaseException | None] = [exc]
    while waiting:
        current = waiting.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, SyntaxError | BaseExceptionGroup):
            return True
        seen.add(id(current))
        waiting += (current.__cause__, current.__context__)
    return False


def _safe_repr(exc: SystemExit) -> str:
    """``repr`` of a ``SystemExit``'s code, which is the program's own object."""
    try:
        return repr(exc.code)
    except BaseException:  # noqa: BLE001 - its repr failed: still an exit
        return "<unprintable>"


def _exit_text(exc: SystemExit) -> str:
    """Why a program that raised ``exc`` failed; and, where ``unittest.main()`` raised it
    (it exits when its tests end, and an exit is never a pass), how to call it instead."""
    text = (f"the program called exit({_safe_repr(exc)}): only a program that runs to its end "
            "passes (an exit is a failure, even after its last assert)")
    trace = exc.__traceback__
    while trace is not None:
        if str.endswith(trace.tb_frame.f_code.co_filename, _UNITTEST_MAIN):
            return (text + " (unittest.main() exits when its tests end: call "
                    "unittest.main(exit=False) and assert on its result, e.g. "
                    "assert unittest.main(exit=False).result.wasSuccessful())")
        trace = trace.tb_next
    return text


def _safe_str(value: object, what: str, show: Callable[[object], str] = str) -> str:
    try:
        return show(value)
    except BaseException:  # noqa: BLE001 - as traceback says it
        return f"<{what} {show.__name__}() failed>"


def _stack_text(tb: TracebackType | None, source: str, path: str,
                program: list[str]) -> tuple[list[str], bool]:
    """``StackSummary.extract(...).format()`` for the frames from ``tb`` on: line numbers
    from the code's positions, ``linecache`` asked for other files' lines after
    ``lazycache`` and ``checkcache``; ``path``'s lines from ``source`` (split into
    ``program`` once). Equal consecutive frames are counted as they come, and the line of
    each code and instruction is found once, so that a recursion a million deep costs a
    fraction of a second and little memory.

    Only the last :data:`_KEPT_RUNS` runs of equal frames are written, and whether others were
    left out: their text is longer than the tail of a program's stderr that the sandbox keeps
    (:data:`_TAIL`), so that what it keeps is the same, and a deep recursion through two
    functions (which ``traceback`` writes in full, 3 lines a frame) costs no more time."""
    # [(file, line, function), count] per run of equal frames, the last _KEPT_RUNS of them
    runs: collections.deque[list[Any]] = collections.deque(maxlen=_KEPT_RUNS)
    made = 0  # runs in all
    # (id of the code, instruction) -> (file, line, function); (file, id of the globals) seen
    wheres: dict[tuple[int, int], tuple[str, int | None, str]] = {}
    cached: set[tuple[str, int]] = set()
    while tb is not None:
        frame = tb.tb_frame
        code, lasti = frame.f_code, tb.tb_lasti
        where = wheres.get((id(code), lasti))  # (the frames, and so their code, are alive)
        if where is None:
            lineno = (next(itertools.islice(code.co_positions(), lasti // 2, None))[0]
                      if lasti >= 0 else None)
            where = (code.co_filename, tb.tb_lineno if lineno is None else lineno, code.co_name)
            if lineno is not None:  # (else the entry's own line, which a made one may set)
                wheres[id(code), lasti] = where
        if where[0] != path and (where[0], id(frame.f_globals)) not in cached:
            cached.add((where[0], id(frame.f_globals)))  # (again, the same call: no change)
            linecache.lazycache(where[0], frame.f_globals)
        if runs and runs[-1][0] == where:
            runs[-1][1] += 1
        else:
            runs.append([where, 1])
            made += 1
        tb = tb.tb_next
    for name in {name for name, _ in cached}:
        linecache.checkcache(name)
    out: list[str] = []
    for (filename, lineno, name), count in runs:
        if lineno is None:
            line = ""
        elif filename == path:
            if not program:
                program += _lines(source)
            line = program[lineno - 1] if 1 <= lineno <= len(program) else ""
        else:
            line = linecache.getline(filename, lineno)
        row = '  File "{}", line {}, in {}\n'.format(filename, lineno, name)  # noqa: UP032
        if line.strip():
            row += "    {}\n".format(line.strip())  # noqa: UP032
        out += [row] * min(count, _REPEATS_SHOWN) + _repeated(count)
    return out, made > _KEPT_RUNS


def _repeated(count: int) -> list[str]:
    more = count - _REPEATS_SHOWN
    if more <= 0:
        return []
    return [f"  [Previous line repeated {more} more time{'s' if more > 1 else ''}]\n"]


def file_bytes(source: str) -> bytes:
    """The bytes of the program's file (UTF-8; lone surrogates stand for the bytes they escape),
    which :func:`file_source` makes what ``python path`` compiles. (The caller compiles: no
    frame of the harness is left between a syntax error and the program.)"""
    return source.encode("utf-8", "surrogateescape")


#: A line as python's file reader reads one (any of its line ends), and its line ends; a line
#: of the text it decodes.
_FILE_LINE, _LINE_END = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?"), re.compile(rb"\r\n|\r|\n")
_TEXT_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
#: A coding declaration (PEP 263) as python's reader finds one in a line: a comment whose
#: first ``coding:`` or ``coding=`` followed by a name names the codec; and a line before it.
_CODING = re.compile(rb"[ \t\f]*#[^\r\n]*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT = re.compile(rb"[ \t\f]*(?:[#\r\n]|\Z)")
_PEP_263 = "see https://peps.python.org/pep-0263/ for details"


def file_source(data: bytes, path: str | None = None) -> bytes | str:
    """What ``python path`` compiles of a file that holds ``data``: the bytes themselves, or,
    where a coding declaration names another codec than UTF-8, the text python's file reader
    makes of them: the lines up to the declaration's own read as they are, the rest decoded
    with the codec. (compile() of the bytes decodes the declaration's own line with the codec
    too, so that an escaped line end in the declaration of a ``raw_unicode_escape`` file, a
    comment to python, would end a line for it alone; and it lets bytes that are not UTF-8 pass
    in a comment of a file without a declaration, which python refuses.) ``path``: first check
    the file as python's reader does, SyntaxError in python's words where it refuses it: bytes
    that are not UTF-8 where no byte order mark or declaration says otherwise (in the lines
    before a declaration too), another codec declared after a byte order mark, one python does
    not know or whose decoding fails."""
    bom = data.startswith(b"\xef\xbb\xbf")
    body = data[3:] if bom else data
    at, line, found = 0, b"", None
    for number in (1, 2) if _in_first_lines(body, b"coding") else ():
        # (a declaration on the second line counts after a blank or comment)
        line = _FILE_LINE.match(body, at).group()
        found = _CODING.match(line)
        if found or not line or (number == 1 and not _BLANK_OR_COMMENT.match(line)):
            break
        at += len(line)
    codec = _codec_name(found.group(1).decode("ascii")) if found else None
    if path is not None:
        checked = b"" if bom else body if codec is None else body[:at]
        try:
            checked.decode("utf-8")
        except UnicodeDecodeError as exc:
            number = len(_LINE_END.findall(checked, 0, exc.start)) + 1
            raise SyntaxError(f"Non-UTF-8 code starting with '\\x{checked[exc.start]:02x}' in "
                              f"file {path} on line {number}, but no encoding declared; "
                              f"{_PEP_263}") from None
    if codec is None or codec == "utf-8":
        return _last_line_end(data)
    if bom and path is not None:
        raise SyntaxError(f"encoding problem: {codec} with BOM")
    end = at + len(line)
    try:  # (python's reader decodes from the declaration's line end on, then skips a line)
        rest = body[end - 1:].decode(codec)
    except (LookupError, UnicodeError):
        if path is not None:
            raise SyntaxError(f"encoding problem: {codec}") from None
        return data  # (compile says so)
    rest = rest[_TEXT_LINE.match(rest).end():]
    return _last_line_end(body[:end].decode("utf-8", "replace") + rest)


def _in_first_lines(data: bytes, word: bytes) -> bool:
    """Whether ``word`` starts within the first two lines of ``data`` (ended by any line end
    python's reader knows)."""
    at = data.find(word)
    return at >= 0 and (data.count(b"\n", 0, at) + data.count(b"\r", 0, at)
                        - data.count(b"\r\n", 0, at)) < 2


def _last_line_end(source: AnyStr) -> AnyStr:
    """``source`` with a newline for the carriage return and newline that end it after a
    backslash: Python 3.11's compile() takes such a source as if a blank line followed, where
    python's file reader (as any later Python) finds the line the backslash leaves open, a syntax
    error. Nothing else changes: python reads both line ends alike."""
    if sys.version_info < (3, 12) and source[-3:] in ("\\\r\n", b"\\\r\n"):
        return source[:-2] + source[-1:]
    return source


def _codec_name(name: str) -> str:
    """The codec a declaration names, as python's tokenizer names it (``get_normal_name``: its
    first 12 characters tell UTF-8 and Latin-1 in their spellings)."""
    head = name[:12].replace("_", "-").lower()
    if head == "utf-8" or head.startswith("utf-8-"):
        return "utf-8"
    if (head in ("latin-1", "iso-8859-1", "iso-latin-1")
            or head.startswith(("latin-1-", "iso-8859-1-", "iso-latin-1-"))):
        return "iso-8859-1"
    return name


def _rehearse(times: int = 8) -> None:
    """Run failing programs in the forking process itself, before it forks any: the caches
    that compiling, running and formatting a traceback fill, and the code they specialise
    (CPython rewrites a function's bytecode in place in its first runs), are then shared with
    every child instead of being written, and their pages copied, in each. (HumanEval's
    programs on Python 3.11: ~263 page faults a child without it, ~254 after 2 to 64 rounds;
    each round costs the server's start ~0.3 ms.)"""
    path = os.path.join(os.sep, "rehearsal.py")
    for source in _REHEARSALS * times:
        try:
            code = compile(file_bytes(source), path, "exec", dont_inherit=True)
            exec(code, {"__name__": "__main__"})
        except Exception as exc:  # noqa: BLE001 - the point
            _error_text(exc, source, path)


def _pool_vacancies() -> dict[int, int]:
    """{block size: free blocks} of the small-object allocator's pools that hold objects (its
    table from ``sys._debugmallocstats``; empty where there is none: PYTHONMALLOC=malloc, not
    CPython)."""
    if not hasattr(sys, "_debugmallocstats"):
        return {}
    stats = os.memfd_create("malloc-stats")
    saved = os.dup(2)
    try:
        os.dup2(stats, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    text = os.pread(stats, 1 << 20, 0).decode("ascii", "replace")
    os.close(stats)
    found = {}
    for line in text.partition("avail blocks\n")[2].splitlines()[1:]:
        fields = line.split()
        if len(fields) != 5 or not all(field.isdigit() for field in fields):
            break
        found[int(fields[1])] = int(fields[4])
    return found


#: An int one digit long (30 bits): one more than it is a new object of 28 bytes.
FILLER_INT = 1 << 29


def _fill_pools(rounds: int = 3) -> list[object]:
    """Objects that fill the free blocks of the allocator's pools that hold objects, to be kept
    as long as this process forks. What a child allocates would otherwise go to those blocks,
    scattered over the heap that imports and the rehearsal left, each a page for the child to
    copy; it goes to fresh pools instead, a few pages (~20 fewer page faults a HumanEval
    program). Making the fillers frees blocks too: a few rounds."""
    fillers: list[object] = []
    empty_bytes = sys.getsizeof(b"")
    for _ in range(rounds):
        for size, free in _pool_vacancies().items():
            if size <= 16:
                fillers.extend(object() for _ in itertools.repeat(None, free))
            elif size <= 32:  # an int above the cached ones: 28 bytes
                fillers.extend(FILLER_INT + 1 for _ in itertools.repeat(None, free))
            elif size > empty_bytes:
                fillers.extend(bytes(size - empty_bytes) for _ in itertools.repeat(None, free))
    return fillers


def _enter_python(streams: tuple[TextIO, TextIO, TextIO]) -> None:
    """What a Python program sees of ``sys``: ``streams`` (see :func:`_program_streams`), also
    as the original streams (``sys.__stdout__``), and the command line of ``python
    program.py`` (its ``__file__`` is the full path, as python makes it; ``sys.argv[0]``, as
    given)."""
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    sys.argv = [PROGRAM]
    sys.orig_argv = [sys.executable, PROGRAM]


def _say_why(kind: bytes, exc: BaseException, source: str, path: str) -> None:
    """A failing Python program's error text, on stderr (for an ``X``, the exit's). The program
    may have rebound what this calls (see :func:`_python_main`, whose call of it catches what
    it raises): its verdict does not depend on it. What the program left in its standard
    streams' buffers goes out first, as python prints its traceback through ``sys.stderr``
    after the program's own writes there (a line not yet ended shows before it)."""
    for name in ("stdout", "stderr"):
        try:  # noqa: SIM105 - see _python_main's docstring
            getattr(sys, name).flush()
        except BaseException:  # noqa: BLE001 - a stream the program broke or removed
            pass
    if kind == b"X":
        exc = RuntimeError(_exit_text(exc))
    else:
        hook = sys.__dict__.get("excepthook", _say_why)  # (_say_why: none, not even None)
        if hook is not _PYTHON_EXCEPTHOOK and _program_s_hook(hook, exc, source, path):
            return
    write(2, _error_text(exc, source, path).encode("utf-8", "backslashreplace"))


def _program_s_hook(hook: object, exc: BaseException, source: str, path: str) -> bool:
    """Have the program's own ``sys.excepthook`` write its error, as python does
    (``PyErr_Print``): with ``sys.last_*`` set and the traceback from the program's frame.
    False where the original's text is still to follow: after the hook's own error where it
    raised, or after a line that says it is missing where the program deleted it."""
    program_frames = exc.__traceback__.tb_next if exc.__traceback__ else None
    if hook is _say_why:
        write(2, b"sys.excepthook is missing\n")
        return False
    traceback_kept = exc.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, program_frames
    if _PY312:
        sys.last_exc = exc
    try:
        exc.__traceback__ = program_frames
        hook(type(exc), exc, program_frames)  # type: ignore[operator]
        return True
    except BaseException as failure:  # noqa: BLE001 - python shows it, then the original
        text = "Error in sys.excepthook:\n" + _error_text(failure, source, path)
        write(2, (text + "\nOriginal exception was:\n").encode("utf-8", "backslashreplace"))
        return False
    finally:
        exc.__traceback__ = traceback_kept


def _flush_io() -> None:
    """What python does as the program's module returns (``flush_io``), before it waits for
    the program's threads: flush ``sys``'s stderr, then its stdout, whatever fails ignored (a
    thread of the program's may be waiting for what that flush writes)."""
    streams = sys.__dict__
    try:  # noqa: SIM105 - see _python_main's docstring (and no loop: a signal handler of the
        # program's that raises as one goes round would skip stdout)
        streams["stderr"].flush()
    except BaseException:  # noqa: BLE001
        pass
    try:  # noqa: SIM105
        streams["stdout"].flush()
    except BaseException:  # noqa: BLE001
        pass


def _join_threads() -> None:
    """Wait for the program's other threads, as python does at exit (``threading._shutdown``,
    which also joins a ThreadPoolExecutor's workers); what that raises python prints and goes
    on."""
    try:  # noqa: SIM105 - see _python_main's docstring
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
    except BaseException:  # noqa: BLE001 - python prints it and goes on
        pass


def _at_exit(status: int) -> int:
    """What python does at exit once the program's threads ended: the atexit callbacks (an
    error there is printed, not a failure; ``os._exit(n)`` there is the exit status), then
    ``sys``'s own stdout and stderr flushed where open; the exit status: ``status``, or 120
    where a flush failed. A stream is open, as python reads it, unless its ``closed`` is true:
    one without that attribute (a program's own capturing object), or whose ``closed`` cannot
    be read or tested, is flushed. Python runs none of the program's signal handlers once its
    atexit callbacks ran (it runs no more bytecode of its own): one that raises between the
    harness's lines here changes nothing, but where it runs as a flush returns, which then
    counts as failed (turning them off first would cost every program ~30 us)."""
    try:  # noqa: SIM105 - (a handler may run as the call returns)
        _run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    outcome = [status]  # (120 kept there as soon as a flush fails, whatever is raised after)
    try:  # noqa: SIM105
        _flush_streams(outcome)
    except BaseException:  # noqa: BLE001
        pass
    return outcome[0]


def _flush_streams(outcome: list[int]) -> None:
    """``sys``'s own stdout and stderr flushed where open (see :func:`_at_exit`); ``outcome[0]``
    set to 120 where one fails."""
    streams = sys.__dict__
    for name in ("stdout", "stderr"):
        stream = streams.get(name)
        if stream is None:
            continue
        try:
            is_open = not stream.closed
        except BaseException:  # noqa: BLE001 - as python's file_is_closed
            is_open = True
        try:
            if is_open:
                stream.flush()
        except BaseException as exc:  # noqa: BLE001 - a stream the program broke
            outcome[0] = 120
            try:  # noqa: SIM105 - see _python_main's docstring
                write(2, f"Exception ignored flushing sys.{name} at exit: {exc!r}\n".encode())
            except BaseException:  # noqa: BLE001
                pass


def _exit_status(exc: SystemExit) -> int:
    """The status python exits with where ``exc`` ends it (``sys.exit(code)``): 0 for None, an
    int's low byte (one beyond 64 bits: 255), else 1, after the code's text (the exit's own,
    where its code cannot be read) on stderr (fd 2 where ``sys.stderr`` is None)."""
    try:
        code = exc.code
    except BaseException:  # noqa: BLE001 - as python: the exit itself is shown
        code = exc
    if code is None:
        return 0
    if isinstance(code, int):  # (its value, whatever operators a subclass defines)
        value = int.__index__(code)
        return value & 0xFF if -(1 << 63) <= value < 1 << 63 else 0xFF
    stderr = sys.__dict__.get("stderr")
    for text in (code, "\n"):  # (as python writes them: what fails there is ignored)
        try:
            if stderr is None:
                write(2, str(text).encode("utf-8", "backslashreplace"))
            else:
                stderr.write(str(text))
        except BaseException:  # noqa: BLE001
            pass
    return 1


def _python_main(source: str, path: str, folder: str, compiled: bytes | memoryview | None,
                 key: bytes, below: int, loader: SourceFileLoader) -> NoReturn:
    """Run ``source`` (``compiled``: its code from ``compiling.precompile``, or None) as
    ``__main__`` at ``path`` in ``folder`` in this (child) process; emit the token after it
    returns, or, where it raised, the report of its kind (``M``: memory; ``X``: it exited;
    ``E``: another exception) on fd 4 with the report key right after it in the same write (the
    worker believes a report only where the key follows it; see :data:`TOKEN_BYTES`), or, where
    it does not compile, ``S`` with the pass token after it, before any code of the program's
    could run (the program can reach the key: it cannot make itself a syntax error); a process
    that the program forked (not this one) sends none of them (nor has it the token to: see
    :data:`_TOKEN_AT`).
    ``key``: the report key, as bytes. ``below``: the recursion levels the harness takes under
    this function's frame (see :func:`_exec_levels`). ``loader``: the module's ``__loader__``,
    as python gives a script. (Every object this touches is a page the child copies, so it does
    little, with no helper such as ``contextlib.suppress``.)

    The program can rebind this module's globals (its frames lead there, as does ``gc`` once
    it unfreezes what the fork server froze), and, from Python 3.13 on (PEP 667), the locals
    of this frame too, from any thread, at any time (before 3.13, a trace or profile function,
    which is given this frame, writes its locals too). So the token goes out only on the line
    that runs the program's code, where that code returned, whatever this frame holds: its
    parts are on the stack before the first runs, which no name reaches; and a failure is
    reported with the report key as bytes made before the program
    runs (it authenticates no pass: a program that finds it can only fail), never from the
    memory that holds the token. What it can rebind changes the error text, or keeps a pass
    from going out, not what a failure sends. (Calling the harness's own functions, C
    or Python, this one again among them, or reading its memory, is another matter: see
    docs/SANDBOX.md.)"""
    run, end, pid_now, say, report = run_code, _exit, getpid, _say_why, write
    caught, exited, starved = BaseException, SystemExit, MemoryError
    profile_with, trace_with = setprofile, settrace
    # (send_token: no profile function sees its call, as none sees python's exit)
    token_at, token_out, token_size = _TOKEN_AT, _forkloop.send_token, 1 + TOKEN_BYTES
    own_pid = pid_now()
    # The token, from its pipe into this process's page (see _TOKEN_AT), and fd 3 closed: the
    # program cannot read it there, nor find it in a Python object.
    _forkloop.read_token(token_at, TOKEN_FD)
    close(TOKEN_FD)
    close(FAILURE_FD)  # what fails from here on is the program's (see FAILURE_FD)
    # Its folder first on the import path, from here: had the forking process looked it up
    # before the folder existed, the import system would remember it as a dead end.
    sys.path.insert(0, folder)
    # As deep a recursion as ``python path`` allows: the harness's levels below the program's
    # (this function's frame and those under it) are not counted against it.
    sys.setrecursionlimit(sys.getrecursionlimit() + below + 1)

    code: tuple[CodeType, ...] | None = None
    if compiled is not None:
        try:  # noqa: SIM105 - see the docstring
            code = unmarshal(compiled)
        except (ValueError, EOFError, TypeError, MemoryError):  # compiled below instead
            pass
    kind, error = b"", None
    try:
        if code is None:
            code = (compile(file_source(file_bytes(source)), path, "exec", dont_inherit=True),)
    except COMPILE_ERRORS as exc:
        kind, error = b"S", exc
        # (none of the program's code has run, nor will: ``S`` goes out with the pass token
        # after it, which no program reaches, where the report key's a program can find)
        _forkloop.mark(token_at, ord("S"))
        token_out(4, token_at, token_size, own_pid)
    except MemoryError as exc:
        kind, error = b"M", exc
    if not kind:
        # A module of its own, as ``python path`` gives: pickle, unittest, doctest and typing
        # look the program up as ``sys.modules["__main__"]``; its names in python's order
        # (an empty ``__annotations__`` up to Python 3.13).
        main = ModuleType("__main__")
        namespace = main.__dict__
        if MAIN_ANNOTATIONS:
            namespace["__annotations__"] = {}
        namespace.update(__builtins__=builtins, __file__=path, __cached__=None,
                         __loader__=loader)
        sys.modules["__main__"] = main
        # The whole, or its first part and its shared tail (see compiling.py), the tail loaded
        # onto the stack, with ``exec`` and the namespace, before the first part runs: nothing
        # between them that the first part could change (a name, ``builtins.exec``) or reach
        # (an iterator of ``code``). (``exec(tail, namespace, None)``: None stands for the
        # namespace.) Then, on the same line (no line of this frame's between them, where a
        # trace function could act), ``T`` and the token, where the code returned (``exec``
        # returns None) in this process: the tests are over. sent: False where fd 4 was closed.
        sent = False
        try:
            if len(code) == 2:
                sent = run(code[1], namespace, run(code[0], namespace)) or token_out(
                    4, token_at, token_size, own_pid)
            else:
                sent = run(code[0], namespace) or token_out(4, token_at, token_size, own_pid)
        except exited as exc:
            kind, error = b"X", exc
        except starved as exc:
            kind, error = b"M", exc
        except caught as exc:
            kind, error = b"E", exc
        # The program's trace and profile functions end with its code, before any code of the
        # harness's runs (one that raises at this call removes itself); its module loses
        # __file__ and __cached__, as python's does.
        try:  # noqa: SIM105 - see the docstring
            profile_with(None)
        except caught:
            pass
        try:  # noqa: SIM105 - (an audit hook of the program's may raise at either)
            trace_with(None)
        except caught:
            pass
        try:  # noqa: SIM105 - see the docstring (python flushes them as the module returns)
            _flush_io()
        except caught:
            pass
        try:  # noqa: SIM105 - (a signal handler of the program's may raise here)
            namespace.pop("__file__", None)
            namespace.pop("__cached__", None)
        except caught:
            pass
        if not kind:
            # The tests are over, the token out and the standard streams flushed (above, as
            # python flushes them as the module returns): then what the interpreter does at exit
            # (Py_FinalizeEx), in its order: wait for the program's other threads, run the
            # atexit callbacks, flush the streams again (see _at_exit). The exit status must
            # still be 0 (a thread's ``os._exit(1)`` then fails the program, as its
            # ``os._exit(0)`` does not). Objects alive at the end are not finalized. A signal
            # handler of the program's still pending runs as one of these calls begins: its
            # error ends that step, as python's code for it (in ``threading._shutdown``, an
            # atexit callback), and the next goes on (at exit's, twice more where it stopped
            # that from starting; then the program's status, 0, without it).
            if not sent:
                end(1)  # the program closed fd 4: no token, a failure
            try:  # noqa: SIM105 - see the docstring
                _join_threads()
            except caught:
                pass
            status = 0
            try:
                status = _at_exit(0)
            except caught:
                try:
                    status = _at_exit(0)
                except caught:
                    try:  # noqa: SIM105
                        status = _at_exit(0)
                    except caught:
                        pass
            end(status)
    # A process the program forked, in which its code raised, reports nothing and ends as
    # python would end it: the error's text and status 1, or its exit's own status
    # (``sys.exit(3)`` in a forked child), then what python does at exit.
    forked = pid_now() != own_pid
    try:  # noqa: SIM105 - see the docstring
        if not forked and kind != b"S":  # (sent above)
            report(4, kind + key)
    except caught:  # (a program that closed fd 4: no report, a failure)
        pass
    status = 1
    try:
        if forked and kind == b"X":
            status = _exit_status(error)
        else:
            say(kind, error, source, path)
    except caught:  # (what the program made of it: the verdict has gone out)
        pass
    if forked:
        _join_threads()
        status = _at_exit(status)
        if type(error) is KeyboardInterrupt:  # python then ends itself by SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(pid_now(), signal.SIGINT)
            status = 128 + signal.SIGINT
    end(status)


class Forker:
    """What every child of one forking process shares: the uid programs run as, the memory
    cgroup they join (its ``cgroup.procs``, open for writing), their environment and working
    directory (the same for every program).

    ``dedicated``: this process does nothing but fork programs (the fork server), so it sets
    the programs' signal dispositions once for all its children, unless it is the ``init`` of
    their PID namespace; otherwise (the worker itself) each child does. The fork server joins
    the memory cgroup once warm (its heap so far stays charged where it was), so that its
    children are born inside: a child that moved itself in would wait, in the kernel, for an
    RCU grace period whenever no process had moved recently (here 10-15 ms after any program that
    ran longer than that). Every child makes itself the OOM killer's first choice
    (``prepare_child`` in ``_forkloop.c``), so the server is chosen only when a program undid
    that (without CAP_SYS_RESOURCE the sandbox cannot stop it): its worker then reports
    ``memory``, and a new one takes over. The worker's own children join the cgroup one by one.

    ``child_filter``: a seccomp filter each child adds to its own before the program starts
    (:func:`isolation.memory_file_filter`, where there is no memory cgroup), or None.
    ``exec_levels``: what :func:`_exec_levels` says, where the caller measured it.

    Making one readies the calling process to fork programs: it imports what they will use
    (``preload`` and the standard modules, under the caller's environment: one BLAS thread),
    takes on the programs' environment, and freezes its heap once warm.
    """

    def __init__(self, uid: int | None, cgroup_procs: int | None, env: dict[str, str],
                 work: str, preload: Sequence[str], dedicated: bool, init: bool = False,
                 child_filter: bytes | None = None, exec_levels: int | None = None):
        for module in (*STANDARD_MODULES, *preload):
            importlib.import_module(module)
        if _NUMPY_GLOBAL_GENERATOR in sys.modules:  # (a preload imported it: pandas does)
            os.register_at_fork(after_in_child=_reseed_numpy)
        os.environ.clear()
        os.environ.update(env)
        self.uid, self.env, self.work = uid, env, work
        # what each child adds to its seccomp filters (see isolation.memory_file_filter)
        self.child_filter = SeccompProgram(child_filter) if child_filter else None
        # the cgroup each child joins itself (the fork server joins it once, below)
        self.cgroup_procs = None if dedicated else cgroup_procs
        self.dedicated, self.init = dedicated, init
        # The init of a PID namespace gets the signals its programs send it only where it has a
        # handler: it keeps SIGINT ignored, and each child takes the programs' dispositions.
        self.shared_signals = dedicated and not init
        # Every descriptor a child is given is above the numbers it installs them on, which
        # this process holds (so a child need not move them first: each object a child touches
        # is a page it copies).
        self.placeholders = []
        while (placeholder := os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)) <= FAILURE_FD:
            self.placeholders.append(placeholder)
        os.close(placeholder)
        # The fork server's list of its children, kept open (see _kill_children).
        self.children = os.open(f"/proc/self/task/{os.getpid()}/children",
                                os.O_RDONLY | os.O_CLOEXEC) if dedicated else -1
        # The fork loop, and the one run it is given for every program (what it holds of a
        # program is zeroed once read: hm_forget).
        self.loop = fork_loop()
        self.run = _Run(uid=-1 if uid is None else uid, children=self.children, pidfd=-1,
                        secrets=_TOKEN_AT, report_r=-1, failure_r=-1, work=os.fsencode(work),
                        seccomp=ctypes.addressof(self.child_filter) if self.child_filter else None,
                        cgroup_procs=-1 if self.cgroup_procs is None else self.cgroup_procs)
        self.run.fds[:] = [-1] * 6
        self.run_at = ctypes.addressof(self.run)  # (what the loop's calls take)
        self.path = os.path.join(work, PROGRAM)
        self.loader = SourceFileLoader("__main__", self.path)  # (each program's __loader__)
        self.streams = _program_streams()  # made once: a fork need not build them
        if self.shared_signals:  # what every child would set, once
            program_signals()
        if dedicated:  # (this process writes to neither)
            _enter_python(self.streams)
        # (measured here only where not given: the fork server is told it, as the recursion
        # would leave ~250 KB more in the heap that each fork copies the page tables of)
        self.exec_levels = _exec_levels() if exec_levels is None else exec_levels
        _rehearse()
        gc.collect()
        self.fillers = _fill_pools()
        gc.freeze()  # the collector never writes the pages the children share
        # Give back the free memory that imports and the rehearsal left in the heap: resident
        # pages are page table entries every fork copies and every child's exit frees (glibc;
        # other C libraries have no malloc_trim and keep them).
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
        # What a forked child starts with: its address-space limit counts above this (what the
        # process maps later is far inside the room the worker leaves, ADDRESS_SPACE_ROOM_MB).
        self.run.mapped = _mapped_bytes()
        self.frames_below: int | None = None  # those under the loop's caller (launch, serve)
        if dedicated and cgroup_procs is not None:
            os.write(cgroup_procs, b"0")  # "0": the writer itself
            os.close(cgroup_procs)

    def launch(self, request: Request) -> Reply:
        """Run one program to its end (or its time limit); see :data:`Request`, :data:`Reply`.
        In the fork server, processes the program left as the server's children
        (``clone(CLONE_PARENT)`` puts them there, out of the worker's reach) are killed and
        counted as escaped; in the worker, its sweep finds them. LaunchFailed: no child was
        made (the process is as it was). (The fork server runs :meth:`serve` instead.)"""
        argv, source, compiled, limits, timeout_s = request
        if self.frames_below is None:  # (its callers are the same each time: counted once)
            self.frames_below = _frames_under(sys._getframe())
        run = self.run
        run.timeout_s, run.command, run.rlimits[:] = timeout_s, argv is not None, limits
        state = self.loop.launch(self.run_at)
        if state == _CHILD:
            self._child(argv, source, compiled)
        self._finish(state)
        reply = (run.status, bool(run.timed_out), run.part("report"), bytes(run.token),
                 run.part("out").decode("utf-8", "replace"),
                 run.part("err").decode("utf-8", "replace"), run.escaped, run.part("failure"),
                 bool(run.untouched))
        self.loop.forget(self.run_at)  # (the next child is forked with this memory)
        return reply

    def serve(self, requests: int, replies: int) -> None:
        """The fork server's loop (``hm_serve``): requests from the worker on ``requests``
        (:data:`_REQUEST`), replies on ``replies`` (:data:`_REPLY`), until the worker closes
        its end. A program the loop could not make a child for is answered so (and the loop
        goes on); anything else that fails ends the server."""
        if self.frames_below is None:
            self.frames_below = _frames_under(sys._getframe())
        run = self.run
        while True:
            state = self.loop.serve(self.run_at, requests, replies)
            if state == _END:
                return
            if state == _CHILD:  # (read in place: each page a copy writes, the child copies)
                head, code = self.loop.request(self.run_at)
                argv, source = unmarshal(head)
                self._child(argv, source, code)
            if state == _BROKEN:
                raise OSError(run.error, f"the fork loop failed: {os.strerror(run.error)}")
            self._finish(state)
            if self.loop.reply(self.run_at, replies) != 0:
                raise OSError(_plain_errno(), "the fork server cannot reply")

    def _finish(self, state: int) -> None:
        """Finish the run the loop handed back (``state``): what is rare, here, then what the
        program left, collected (``hm_collect``)."""
        run = self.run
        if state == -1:
            raise LaunchFailed(run.error, f"no child could be made: [Errno {run.error}] "
                                          f"{os.strerror(run.error)}")
        try:
            if state == -2:  # a child runs, unwatched
                raise LauncherError(run.error, f"the program's process {run.pid} cannot be "
                                               f"watched: {os.strerror(run.error)}")
            if state == _ATTEND:
                self._attend(run)
        except BaseException:
            self.loop.close(self.run_at)
            raise
        self.loop.collect(self.run_at)

    def _attend(self, run: _Run) -> None:
        """A run that timed out, whose child cannot be reaped yet, or that left processes:
        the program killed (its tracers too), reaped, and what it left killed and counted."""
        try:
            if run.timed_out:
                _end(run.pid, run.pidfd)
        finally:
            os.close(run.pidfd)
            run.pidfd = -1
        if not run.reaped:
            run.status = _reap(run.pid, run.rlimits[1])
        # (the worker sweeps its own)
        run.escaped = _kill_children(self.children, self.init) if self.dedicated else 0

    def _child(self, argv: list[str] | None, source: str | None,
               compiled: bytes | memoryview | None) -> NoReturn:
        """The program, in a child the fork loop set up (``prepare_child``): its signal
        dispositions (where the forking process could not set them for all), then its Python
        or its command."""
        try:
            if not self.shared_signals:
                program_signals()
            if argv is None:
                assert source is not None
                if not self.dedicated:
                    _enter_python(self.streams)
                _python_main(source, self.path, self.work, compiled,
                             self.loop.key(self.run_at),
                             # (the loop's caller's frame and _child's, and what exec costs)
                             self.frames_below + 2 + self.exec_levels, self.loader)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (see program_signals)
            os.execve(argv[0], argv, self.env)
        except BaseException as exc:  # the sandbox failed before the program started
            with contextlib.suppress(BaseException):  # (closed once it has: see FAILURE_FD)
                write(FAILURE_FD, repr(exc).encode()[:1000])
            _exit(70)


#: Rounds (of 10 ms) given a killed program to end, and an ended one to be reaped, while the
#: processes that trace it are killed: then the sandbox gives up on it (LauncherError).
END_ROUNDS = 1000


def _exec_levels() -> int:
    """The recursion levels that running a module's code with ``exec`` costs beyond its frame:
    one on Python 3.11 (where entering the interpreter's loop from C counts), none from 3.12
    on; what ``python path``, which runs the file's code from C, does not pay. Found as how much
    less deep a recursion in a module run so goes than one called from here."""
    deepest = 0

    def down() -> None:
        nonlocal deepest
        deepest += 1
        down()

    with contextlib.suppress(RecursionError):
        down()
    module: dict[str, Any] = {}
    exec(compile("def down():\n    global deepest\n    deepest += 1\n    down()\n\n"
                 "deepest = 0\ntry:\n    down()\nexcept RecursionError:\n    pass\n",
                 "<recursion levels>", "exec"), module)
    return deepest - module["deepest"] - 1  # (the module's own frame)


def _frames_under(frame: FrameType) -> int:
    """How many frames the stack holds under ``frame``."""
    count = 0
    while frame.f_back is not None:
        count, frame = count + 1, frame.f_back
    return count


def _end(pid: int, pidfd: int) -> None:
    """Kill the program's group and wait for its process to end. A thread of it that another
    process of the program traces cannot end before its tracer does: tracers are killed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(END_ROUNDS):
        if select.select([pidfd], [], [], 0.01)[0]:
            return
        _kill_tracers(pid)
    raise LauncherError(f"the program's process {pid} does not end")


def _reap(pid: int, cpu_seconds: int) -> int:
    """The wait status of the program's process ``pid``, which has ended (a zombie that a
    tracer holds is released when the tracer is killed). One killed after ``cpu_seconds`` of
    CPU time, its soft limit, reads as killed by that limit's SIGXCPU: the kernel's SIGKILL at
    the hard limit ends a program that ignores SIGXCPU."""
    for _ in range(END_ROUNDS):
        reaped, status, usage = os.wait4(pid, os.WNOHANG)
        if reaped:
            if (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
                    and usage.ru_utime + usage.ru_stime >= cpu_seconds):
                return int(signal.SIGXCPU)  # (a wait status: the signal alone)
            return status
        _kill_tracers(pid)
        time.sleep(0.01)
    raise LauncherError(f"the program's process {pid} ended but cannot be reaped")


def _kill_tracers(pid: int) -> None:
    """Kill every process that traces a thread of ``pid`` (the ``TracerPid`` line of the
    thread's status: a line of its own, which no thread name can fake, as the kernel escapes a
    newline in the ``Name`` line)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # reaped meanwhile
        return
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        tracer = int(status.split(b"\nTracerPid:", 1)[1].split(None, 1)[0])
        if tracer:
            with contextlib.suppress(ProcessLookupError):
                os.kill(tracer, signal.SIGKILL)


#: Seconds that killed processes may take to end with none of them ending (see
#: :class:`KillRounds`): a process that SIGKILL reached is done for, but first unmaps its
#: memory, in time that grows with the pages it shares with others (200 processes sharing 512
#: MiB took ~6 s to end, one after another, on 2 cores).
DYING_S = 10.0


class KillRounds:
    """When to stop killing a program's leftover processes and give up: after ``rounds``
    rounds that each found processes not seen before (a fork bomb outrunning the kills), or
    :data:`DYING_S` seconds in which processes already killed neither ended nor were joined
    by new ones (what SIGKILL cannot end at once: a zombie a tracer holds, a process stuck in
    the kernel)."""

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.seen: set[int] = set()
        self._left = 0
        self._since = time.monotonic()

    def wait(self, alive: Collection[int]) -> float | None:
        """Seconds to wait before the next round, after this one found ``alive`` (and killed
        them); None to give up."""
        fresh = not self.seen.issuperset(alive)
        self.seen.update(alive)
        if fresh:
            self.rounds -= 1
            if self.rounds < 0:
                return None
        now = time.monotonic()
        if fresh or len(alive) < self._left:
            self._since = now
        elif now - self._since > DYING_S:
            return None
        self._left = len(alive)
        return 0.001 if fresh else 0.01


def _kill_children(children: int, everything: bool, rounds: int = 200) -> int:
    """Kill and reap every child of this (single-threaded) process; return how many there
    were. ``children``: its ``/proc/self/task/PID/children``, open; it lists the living and the
    dead not yet reaped, so one ``pread`` tells that there is none (no exception raised, whose
    objects would be pages written after every fork). ``everything``: this process is the init
    of the programs' PID namespace, where every process is a program's (each descends from a
    child of its: with none, none is left), all killed at once each round (``kill(-1)``), so
    that a fork bomb's new processes cannot outrun the rounds. Children that outlast the
    rounds (:class:`KillRounds`) make it raise: the server then exits, and its children pass
    to the worker, whose sweep kills every process of the sandbox uid at once (or, with the
    namespace's init, the kernel kills every process in it)."""
    if not os.pread(children, 1, 0):
        return 0
    kills = KillRounds(rounds)
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:  # reap the dead
                pass
        except ChildProcessError:  # none left
            return len(kills.seen)
        with open(f"/proc/self/task/{os.getpid()}/children", "rb") as handle:
            alive = [int(child) for child in handle.read().split()]
        if everything:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        for child in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            _kill_tracers(child)
        pause = kills.wait(alive)
        if pause is None:
            raise RuntimeError(f"children of the fork server outlast the kills ({len(alive)} "
                               f"of {len(kills.seen)} left)")
        time.sleep(pause)


#: Every resource limit a process has (each a program's child inherits, and may not raise).
RESOURCES = tuple(sorted({getattr(resource, name) for name in dir(resource)
                          if name.startswith("RLIMIT_")}))


#: ``ioprio_get``'s and ``sched_getattr``'s numbers (not in the standard library), where known.
_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)
_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}.get(os.uname().machine)
IOPRIO_WHO_PROCESS = 1
SCHED_ATTR_SIZE = 56  # (struct sched_attr's first version: what every kernel since 4.3 fills)


def _scheduling(pid: int) -> bytes | None:
    """Process ``pid``'s scheduling attributes as ``sched_getattr`` gives them (policy, flags,
    niceness, priority, and what ``sched_setattr`` alone sets: the time slice, since Linux 6.12,
    and the utilisation clamps), where the call is known."""
    if _SCHED_GETATTR is None:
        return None
    attributes = ctypes.create_string_buffer(SCHED_ATTR_SIZE)
    check(_plain_libc.syscall(_SCHED_GETATTR, pid, attributes, SCHED_ATTR_SIZE, 0),
          "sched_getattr", _plain_errno)
    return attributes.raw


def process_settings(pid: int) -> tuple[object, ...]:
    """The resource limits, niceness, scheduling policy, priority and attributes (the time
    slice: red team, without root), I/O priority (on x86-64 and arm64) and CPUs of process
    ``pid`` (0: this one): what another process of its uid may change without any privilege
    (``prlimit``, ``setpriority``, ``sched_setscheduler``, ``sched_setattr``, ``ioprio_set``,
    ``sched_setaffinity``), and every program forked from it would inherit."""
    io = (_plain_libc.syscall(_IOPRIO_GET, IOPRIO_WHO_PROCESS, pid)
          if _IOPRIO_GET is not None else None)
    return (*(resource.prlimit(pid, limit) for limit in RESOURCES),
            os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid),
            os.sched_getparam(pid).sched_priority, _scheduling(pid), io,
            frozenset(os.sched_getaffinity(pid)))


class InProcess:
    """The worker forks its programs itself (without root, where it has no PID namespace to
    give a fork server)."""

    pid = pidfd = None  # no process apart from the worker
    #: Programs compile in their child: compiling in the worker would change the process every
    #: later program is forked from (a ``\\N{...}`` literal imports ``unicodedata``).
    compiles_here = False

    def __init__(self, uid: int | None, cgroup_procs: int | None, env: dict[str, str],
                 work: str, preload: Sequence[str], child_filter: bytes | None = None):
        self.forker = Forker(uid, cgroup_procs, env, work, preload, dedicated=False,
                             child_filter=child_filter)

    def launch(self, request: Request) -> Reply:
        return self.forker.launch(request)

    def alive(self) -> bool:
        return False

    def stop(self) -> None:
        """Nothing runs apart from the worker."""


class ForkServer:
    """The worker's end of a fork server (see the module docstring): started by ``python -B -P
    _boot.py serve``, the interpreter the worker runs in with its ``site`` (the builtins
    ``exit`` and ``help``, ``.pth`` import hooks) and its import path, writing no bytecode;
    it imports this module from ``code``, the pool's memory file (``_boot.compiled_modules``).

    ``compiles_here``: whether a program compiled in the worker (``compiling.precompile``) compiles
    as it would in the server's child: the server's warning filters, once its preloads are
    imported (one may change them), are the worker's."""

    def __init__(self, uid: int | None, cgroup_procs: int | None, env: dict[str, str],
                 work: str, preload: Sequence[str], code: int,
                 before_exec: Callable[[], None] | None = None,
                 child_filter: bytes | None = None):
        self.pid: int | None = None
        self._pidfd: int | None = None
        requests_r, self._requests = os.pipe()
        self._replies, replies_w = os.pipe()
        try:
            argv = [sys.executable, "-B", "-P", *INTERPRETER_OPTIONS,
                    os.path.join(os.path.dirname(__file__), "_boot.py"), "serve"]
            # the worker's (one BLAS thread), for the imports; and every function the server's
            # libraries call bound at its start, not on first use: a child's first call of one
            # would bind it, and write a page (of the table that holds it) for the child to copy
            server_env = {**os.environ, "LD_BIND_NOW": "1"}
            fds = [requests_r, replies_w, 2, code] + ([cgroup_procs] if cgroup_procs is not None
                                                     else [])
            self.pid = os.fork()
            if self.pid == 0:
                try:
                    if before_exec is not None:
                        before_exec()
                    _install_fds(fds)
                    os.execve(argv[0], argv, server_env)
                except BaseException as exc:
                    with contextlib.suppress(BaseException):
                        os.write(2, f"cannot start the fork server: {exc!r}\n".encode())
                finally:
                    os._exit(70)
            self._pidfd = os.pidfd_open(self.pid)
            config = {"uid": uid, "cgroup_procs": 4 if cgroup_procs is not None else None,
                      "env": env, "work": work, "preload": list(preload), "path": sys.path,
                      "child_filter": child_filter, "exec_levels": _exec_levels()}
            write_message(self._requests, config)
            hello = read_message(self._replies, STARTUP_TIMEOUT_S)
        except OSError as exc:
            self.stop()
            raise LauncherError(f"the fork server did not start: {exc}") from exc
        finally:
            os.close(requests_r)
            os.close(replies_w)
        if not (isinstance(hello, tuple) and hello[0] == "ready"):
            self.stop()
            raise LauncherError(f"the fork server did not start: {hello}")
        self.compiles_here = hello[1] == repr(warnings.filters)

    def launch(self, request: Request) -> Reply:
        """Run one program in the server. LaunchFailed when no child could be made there (the
        server lives on); LauncherError, and the server stopped, when it dies or stops
        answering."""
        argv, source, compiled, limits, timeout_s = request
        payload = marshal.dumps((argv, source))
        code_at = -1 if compiled is None else len(payload)
        try:
            _write_all(self._requests, b"".join((
                _REQUEST.pack(len(payload) + len(compiled or b""), timeout_s, argv is not None,
                              code_at, *limits), payload, compiled or b"")))
            (state, status, timed_out, escaped, untouched, _, *sizes, token), body = _read_reply(
                self._replies, time.monotonic() + timeout_s + GRACE_S)
        except OSError as exc:
            self.stop()
            raise LauncherError(f"the fork server failed: {exc}") from exc
        if state == _FAILED:
            raise LaunchFailed(status, f"no child could be made: [Errno {status}] "
                                       f"{os.strerror(status)}")
        report, failure, out, err = _split(body, sizes)
        return (status, bool(timed_out), report, token, out.decode("utf-8", "replace"),
                err.decode("utf-8", "replace"), escaped, failure, bool(untouched))

    @property
    def pidfd(self) -> int | None:
        """The server's pidfd (None where it could not be opened, or once stopped)."""
        return self._pidfd

    def alive(self) -> bool:
        """Whether the server runs (its pidfd turns readable when it exits)."""
        return self.pid is not None and not select.select([self._pidfd], [], [], 0)[0]

    def stop(self) -> None:
        for fd in (self._requests, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.pid is None:
            return
        try:
            if self._pidfd is None:  # started, but no pidfd could be opened
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            else:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED)
        except (ChildProcessError, ProcessLookupError):  # the sweep reaped it already
            pass
        finally:
            if self._pidfd is not None:
                os.close(self._pidfd)
            self.pid = self._pidfd = None


def serve() -> None:
    """The fork server's main loop: the config, then one reply per request until EOF."""
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    set_dumpable(False)
    config = read_message(requests)
    try:
        sys.path[:] = config["path"]
        forker = Forker(config["uid"], config["cgroup_procs"], config["env"], config["work"],
                        config["preload"], dedicated=True, init=os.getpid() == 1,
                        child_filter=config["child_filter"], exec_levels=config["exec_levels"])
    except BaseException as exc:
        write_message(replies, "".join(traceback.format_exception(exc)[-3:]))
        raise SystemExit(1) from exc
    write_message(replies, ("ready", repr(warnings.filters)))
    forker.serve(requests, replies)
