"""The sandbox worker: one program at a time, from request to verdict.

Started by :class:`hybridmetric.sandbox.pool.Sandbox` with a clean environment, it isolates itself
once (network and mount namespaces, seccomp, subreaper; see ``isolation.py``), starts its fork
server (``launcher.py``: a warm Python that imports the modules a study needs), then answers each
batch of requests on stdin with a result for each on stdout (``marshal`` messages; see
``pool._Worker``). It compiles a batch's Python programs first (``Worker.prepare``); for each
program it makes the private working directory, compiles what needs compiling, has the program
launched in a forked child (own session, rlimits, the worker's unprivileged uid; a Python program
costs a fork, not an interpreter start), then tells in one call that the program left nothing
(``leftovers.py``), or else sweeps what it left, and gives the verdict.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hybridmetric.sandbox import isolation, languages
from hybridmetric.sandbox.cgroup import MemoryCgroup, cgroup_name
from hybridmetric.sandbox.compiling import precompile
from hybridmetric.sandbox.javac import CompileError, JavacServer
from hybridmetric.sandbox.launcher import (
    BATCH_COMPILED,
    PROGRAM,
    ForkServer,
    InProcess,
    LauncherError,
    Rlimits,
    _error_text,
    file_bytes,
    file_source,
    process_settings,
    read_message,
    set_dumpable,
    write_message,
)
from hybridmetric.sandbox.leftovers import CleanState
from hybridmetric.sandbox.limits import (
    CRASH,
    FAILED,
    MEMORY,
    PASSED,
    SANDBOX_ERROR,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    RunResult,
    cap,
)

#: The name of the programs' working directory: node looks for no package.json from a folder of
#: that name as it loads JavaScript's preload (see ``languages.JS_PRELOAD_SOURCE``).
WORKING_DIRECTORY = "node_modules"
#: What trusted builds (the C++ main wrapper and header) get: nothing of the programs' environment.
BUILD_ENV = {"PATH": languages.SEARCH_PATH, "LANG": "C.UTF-8"}
#: How each runtime says that it ran out of memory where its harness cannot (Python's, Java's
#: ``main`` and node's ArrayBuffer report ``M`` with the report key: see
#: ``launcher._python_main`` and ``languages``): the runtime's own words to the end of a line (a
#: program's output without a newline may come first on it), so that a failing assertion that
#: quotes them, which its own text follows, is a failure; and only where the runtime then aborts
#: (C++'s std::terminate, node's fatal error), or the JVM never started its harness (or
#: aborted), so that a program that prints the words and exits fails. (C++'s, the last of its
#: error text, with the exception's own words after them: libstdc++ aborts as it wrote them,
#: and a failing assertion after words a program printed itself is a failure.)
_OUT_OF_MEMORY = {
    "cpp": re.compile(r"terminate called after throwing an instance of 'std::bad_alloc'\n"
                      r"(?:  what\(\):  .*\n?)?\Z"),
    "javascript": re.compile(r"FATAL ERROR: .*JavaScript heap out of memory$"
                             r"|Fatal process out of memory: .*$"
                             r"|^# Fatal javascript OOM in .*$", re.MULTILINE),
    "java": re.compile(r"^Could not reserve enough space for .*heap"
                       r"|^# There is insufficient memory for the Java Runtime Environment",
                       re.MULTILINE),
}
#: The reports that go out with the pass token: the tests completed, and Python's syntax error.
_TOKEN_REPORTS = (b"T", b"S")
#: The reports each language's harness makes beside ``T`` (see :attr:`Process.kind`): a program
#: can read a report and its key back from fd 4 and send them again with another letter, which
#: counts as no report where no harness of its language writes that letter (a Java program
#: turned its failure into a syntax error so).
_HARNESS_REPORTS = {"python": b"TSMXE", "javascript": b"TME", "java": b"TM", "cpp": b"T"}
#: node's report of a program it could not compile: the error, then the frame of its compiler
#: (CommonJS: ``wrapSafe``; an ES module: ``compileSourceTextModule``, before Node 22 the
#: loader's ``moduleStrategy``); a SyntaxError the program's own code throws comes from elsewhere,
#: and one in a file the program requires has the program's own frames below it.
_JS_SYNTAX_ERROR = re.compile(r"^SyntaxError: .*\n    at (?:wrapSafe|compileSourceTextModule"
                              r"|(?:ModuleLoader|ESMLoader)\.moduleStrategy) .*\n"
                              r"((?:    at .*\n?)*)", re.MULTILINE)
#: A failed C++ ``assert``, and an exception nothing caught: failures, although they abort.
#: (The assertion's expression may span lines: a raw string literal's.)
_CXX_FAILURE = re.compile(r"Assertion `(?s:.*?)' failed\.$|terminate called (?:after throwing "
                          r"an instance of '.*'|without an active exception)$", re.MULTILINE)
#: The linker's or assembler's words for a build whose outputs outgrew their room (not the
#: compiler's diagnostics, which name the program's file or quote its lines).
_BUILD_OUT_OF_ROOM = re.compile(r"^(?!program\.cpp:)(?! *\d* \|).*(?:No space left on device"
                                r"|File too large|file too big)", re.MULTILINE)
#: ... and when the compiler or the linker ran out of memory (their own words, not a quote of
#: the program's).
_BUILD_OUT_OF_MEMORY = re.compile(r"^(?!program\.cpp:)(?! *\d* \|).*(?:virtual memory exhausted"
                                  r"|out of memory allocating|memory exhausted)", re.MULTILINE)
#: What the dynamic loader says when the program's libraries do not fit its memory limit.
_LIBRARIES_OUT_OF_ROOM = "error while loading shared libraries"
#: The memory a C++ program needs beside its static data to start (its libraries' data, the
#: loader's, the first allocations).
STARTUP_ROOM = 32 * 2**20
#: Without a memory cgroup, RLIMIT_DATA alone would not hold shared memory (an anonymous
#: ``MAP_SHARED`` mapping, a mapped memory file, an attached System V segment), which Python and
#: C++ programs can make: those also get an address-space limit (RLIMIT_AS) this far above their
#: memory limit, room for what threads' stacks and malloc's arenas reserve. (node and the JVM
#: reserve many GiB they never touch, and make no shared memory.) Under a memory cgroup, a
#: Python program's RLIMIT_DATA gets the same room (:data:`CGROUP_DATA`).
ADDRESS_SPACE_ROOM_MB = 1024
#: The languages whose programs get that limit.
MAKE_SHARED_MEMORY = frozenset({"python", "cpp"})
#: The RLIMIT_DATA a language's programs get where there is a memory cgroup, which caps what
#: they use: ``"none"`` (C++: the cgroup's OOM killer alone ends one that uses too much, as a
#: ``malloc`` that failed under the rlimit would give it a null pointer to crash on, and its
#: allocations that it never touches cost it nothing, as outside the sandbox) or ``"room"``
#: (Python: :data:`ADDRESS_SPACE_ROOM_MB` above the memory limit, so that what it reserves but
#: never touches fits, as outside: a thread's stack reserves 8 MiB, and under a 1 GiB
#: RLIMIT_DATA no more than ~126 threads could run at once; an allocation far past the limit
#: still fails at once, a ``MemoryError`` whose traceback says where); other languages, and
#: every program without a cgroup: the memory limit.
CGROUP_DATA = {"cpp": "none", "python": "room"}
#: A Python program made ready to run (``Worker._compiled``): its verdict where python refuses
#: its file, else its source as python reads it and its code (``precompile``).
Compiled = RunResult | tuple[str, bytes | str | None]


def program_env(work: str, private_tmp: bool) -> dict[str, str]:
    """The whole environment a program sees; nothing of the caller's leaks in. Its temporary
    files go where they go by default, ``/tmp``, where that is a private folder emptied after
    each program (``private_tmp``); else to its working directory (``TMPDIR``), which goes
    with it."""
    env = {"PATH": languages.SEARCH_PATH, "HOME": work, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1"}
    if not private_tmp:
        env["TMPDIR"] = work
    return env


def needed_paths(preload: Sequence[str] = (), classpath: Sequence[str] = (),
                 homes: Sequence[str] = ()) -> list[str]:
    """What a program must be able to read: this Python (prefixes, import path), where the
    ``preload`` modules are, the tools (each with the folder above its ``bin``: a JDK's, a
    node's), and the Java ``classpath``; and what the fork server starts from (this folder's
    ``_boot.py``). An import path entry that is one of the user's ``homes``, or a folder above
    it (a ``.pth`` file naming it), is left out: it would show the whole home; imports from it
    then fail."""
    real_homes = [os.path.realpath(home) for home in homes]
    imports = [p for p in sys.path if os.path.isabs(p)
               and not any(isolation.is_within(home, os.path.realpath(p)) for home in real_homes)]
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.executable),
             *imports, *classpath,
             os.path.dirname(os.path.realpath(__file__))}
    for name in ("node", "g++", "javac", "java"):
        found = shutil.which(name, path=languages.SEARCH_PATH)
        if found:
            real = os.path.realpath(found)
            folder = os.path.dirname(real)
            paths.add(os.path.dirname(folder) if os.path.basename(folder) == "bin" else real)
    for module in preload:  # (an editable install's, found by its import hook, not the path)
        spec = importlib.util.find_spec(module.partition(".")[0])
        if spec is not None:
            paths.update(spec.submodule_search_locations or
                         ([os.path.dirname(spec.origin)] if spec.origin else []))
    return sorted(p for p in map(os.path.abspath, paths) if os.path.exists(p))


@dataclass
class Process:
    """What is known about one finished child process."""

    status: int
    timed_out: bool
    report: bytes  # what arrived on fd 4
    token: bytes  # the pass token, then the report key (see launcher.TOKEN_BYTES)
    stdout: str
    stderr: str
    escaped: int
    oom: bool  # the kernel killed a process of the program's memory cgroup
    failure: str  # why the sandbox failed before the program started ("" when it did not)
    untouched: bool = False  # no harness took the secrets from fd 3: the runtime never ran it

    @property
    def signal(self) -> int | None:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None

    @property
    def exit_code(self) -> int | None:
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else None

    @property
    def kind(self) -> bytes:
        """What the harness reported: another report (``M``; Python's ``X``, ``E``: see
        ``launcher._python_main``; JavaScript's ``E``, an error after its token), the byte
        before the report key on fd 4, where the harness writes them together, else ``T`` (the
        tests completed) or Python's ``S`` (the program does not compile) where the pass token
        follows it; b"" when neither secret is there (a program that writes to fd 4 itself
        knows neither, and what it can read back from the pipe is a key that authenticates no
        pass). ``S`` counts only with the token: a Python program can find the key (its
        harness's frame holds it), and sent ``S`` with it to read as a syntax error (red team)."""
        half = len(self.token) // 2
        if not half:
            return b""
        passed, key = self.token[:half], self.token[half:]
        at = self.report.find(key)
        while at >= 0:  # (every copy: one after T or S, which no harness writes, hides none)
            if at > 0 and self.report[at - 1:at] not in _TOKEN_REPORTS:
                return self.report[at - 1:at]
            at = self.report.find(key, at + 1)
        at = self.report.find(passed)
        letter = self.report[at - 1:at] if at > 0 else b""
        return letter if letter in _TOKEN_REPORTS else b""

    @property
    def completed(self) -> bool:
        return self.exit_code == 0 and self.kind == b"T"


def _unwritable(source: str) -> RunResult | None:
    """The verdict on a program that cannot be written to a file (a lone surrogate that
    escapes no byte), else None."""
    if not source.isascii():
        try:
            file_bytes(source)
        except UnicodeEncodeError as exc:
            return RunResult(SYNTAX_ERROR, f"the program cannot be written to a file: {exc}")
    return None


def _signal_name(number: int) -> str:
    """``SIGSEGV``, ``SIGRTMIN+6``: the name of a signal (real-time ones have no enum member)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        if signal.SIGRTMIN < number < signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return f"signal {number}"


def _identity(path: str) -> tuple[int, int, int]:
    """Inode, mode and owner: what changes when a folder is replaced or locked."""
    status = os.lstat(path)
    return status.st_ino, status.st_mode, status.st_uid


class Worker:
    def __init__(self, uid: int | None, allow_network: bool, preload: list[str],
                 homes: Sequence[str], code: int, replies: int | None,
                 cpp_standard: str, classpath: Sequence[str] = (), workers: int = 1):
        host_pid = os.getpid()  # before the PID namespace, where the worker is pid 1
        self.cpp_standard = cpp_standard
        self.isolation, self.problems = isolation.isolate_worker(
            uid, allow_network, needed_paths(preload, classpath, homes), homes, replies,
            hidden=languages.java_agent_libraries(), workers=workers)
        # the count of sockets in the worker's own network namespace (see sweep), and what it
        # was as the last program started (where no CleanState holds it: see _count_sockets)
        self._sockets = (isolation.socket_count_file()
                         if self.isolation.network_namespace else None)
        self._sockets_before = 0
        # Without root, programs share the worker's uid: they must not be able to interrupt it
        # (a handled signal reaches a namespace's init) or read and write its memory.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        set_dumpable(False)
        self.uid = self.isolation.uid
        self.root = tempfile.mkdtemp(prefix="hybridmetric-sandbox-")
        self.cxx = os.path.join(self.root, "cxx")  # the C++ build outputs (see _cxx)
        self.js = os.path.join(self.root, "js")  # JavaScript's preload (see _js_preload)
        # each of those folders, once made, and its isolation.tree_state
        self._trusted: dict[str, tuple | None] = {}
        self.retiring = ""  # why this worker must be replaced after its current program
        os.chmod(self.root, 0o711)
        self._root_id = _identity(self.root)
        status = os.lstat(self.root)
        self._root_times = status.st_atime_ns, status.st_mtime_ns
        # One program at a time, always in the same place, so that the environment a program
        # sees is the worker's own, set once (a fork that need not rewrite it is ~0.2 ms faster).
        self.case = os.path.join(self.root, "case")
        self.env = program_env(os.path.join(self.case, WORKING_DIRECTORY),
                               self.isolation.mount_namespace)
        self.program_path = os.path.join(self.env["HOME"], PROGRAM)  # (a Python program's file)
        self._prepared: dict[tuple[str, int | None], Compiled] = {}  # (see prepare)
        if self._programs_own_root:
            self._pin_folders()
        self.javac = JavacServer(self.root, self.uid)  # started on the first Java program
        self.cgroup: MemoryCgroup | None = None
        try:
            self.cgroup = MemoryCgroup.create(cgroup_name(self.uid, host_pid))
            self.isolation = replace(self.isolation, memory_cgroup=True)
        except OSError as exc:
            self.problems.append(f"memory cgroup: {exc}")
        try:
            self.launcher = self._start_launcher(preload, code)
        except BaseException:  # a preload that does not import: leave no cgroup behind
            self._release()
            raise
        finally:  # (those of the user namespace, held until the launcher's namespace is made)
            if os.getuid() != 0:  # (none to drop where no user namespace was made)
                isolation.drop_capabilities()
        self._forker_settings = process_settings(self.launcher.pid or 0)
        self._clean_state = self._make_clean_state()
        self._record_failed = False  # (said once in the log: see _record_clean)
        self._count_sockets()  # (what the fork server and its preloads hold)
        self.sweep()
        self._record_clean()

    def _start_launcher(self, preload: list[str], code: int) -> ForkServer | InProcess:
        """What forks the programs. As root, a fork server: programs run under another uid and
        cannot touch it. Without root they share its uid, so the server is the init of a PID
        namespace of its own, where they can neither signal it (the kernel drops what they send
        their namespace's init) nor, as it is not dumpable, trace or read it; where the worker
        has no PID namespace to make (no user namespace), it forks them itself. ``code``: the
        memory file the server imports ``launcher`` from (see ``_boot.py``)."""
        procs = self.cgroup.procs if self.cgroup is not None else None
        # without a memory cgroup, no memory files (where seccomp works: else no filter at all)
        no_memory_files = (isolation.memory_file_filter()
                if self.cgroup is None and self.isolation.no_keyrings else None)
        if self.uid is not None:
            return ForkServer(self.uid, procs, self.env, self.env["HOME"], preload, code,
                              child_filter=no_memory_files)
        if self.isolation.pid_namespace:
            with isolation.children_in_a_new_pid_namespace():
                return ForkServer(None, procs, self.env, self.env["HOME"], preload, code,
                                  before_exec=isolation.own_proc, child_filter=no_memory_files)
        return InProcess(None, procs, self.env, self.env["HOME"], preload,
                         child_filter=no_memory_files)

    def launcher_died(self) -> bool:
        """Whether the fork server died since the last program: killed from outside, or by
        the OOM killer in that program's last moments (before the sweep, a process the program
        left could still push its cgroup over the limit)."""
        return self.launcher.pid is not None and not self.launcher.alive()

    def _make_clean_state(self) -> CleanState | None:
        """What tells in one call that a program left nothing (see ``leftovers.py``); None where
        a folder the sweep empties cannot be told empty so (its size does not count entries)."""
        paths = isolation.counted_dirs(self.isolation.mount_namespace,
                                       self.isolation.message_queues)
        if paths is None:
            return None
        reads, usage, room = [isolation.own_children()], None, 0
        if self.cgroup is not None:
            events, usage, room = self.cgroup.probes()
            reads.append(events)
        pidfds = [] if self.launcher.pidfd is None else [self.launcher.pidfd]
        return CleanState(reads, paths, pidfds, usage, room, self._sockets,
                          self.isolation.ipc_namespace)

    def _record_clean(self) -> None:
        """After a full sweep that left all clean (no compile server runs, whose process and
        sockets come and go), record it, with the OOM kills counted so far; else the next
        program is swept in full too (where the record fails, every program: slower, no less
        safe)."""
        if self._clean_state is None:
            return
        self._clean_state.forget()
        if self.retiring or self.javac.pid is not None:
            return
        try:
            if self.cgroup is not None:
                self.cgroup.oom_kills()  # (what the record of memory.events then says)
            self._clean_state.record()
        except OSError as exc:
            if not self._record_failed:  # (once: it would fail again after each program)
                sys.stderr.write(f"no record of a clean sweep (each program is swept): {exc}\n")
            self._record_failed = True

    def sweep(self) -> int:
        try:
            spare = [server.pid for server in (self.launcher, self.javac) if server.alive()]
            escaped = isolation.sweep(self.uid, spare=spare)
        except OSError as exc:  # processes outlived every kill round: none may meet the next
            self.retiring = str(exc)
            return 0
        if self._sockets is not None:
            counted = self._sockets
            self._clean(lambda: isolation.collect_sockets_in_flight(
                counted, self._sockets_before_program()), "sockets")
        if self.isolation.mount_namespace:
            self._clean(lambda: isolation.empty_private_dirs(keep=self.root), "/tmp and the like")
        if self.isolation.ipc_namespace:
            self._clean(isolation.remove_ipc_objects, "System V IPC")
        if self.isolation.message_queues:
            self._clean(isolation.remove_message_queues, "POSIX message queues")
        return escaped

    def _guard_root(self) -> None:
        """Without root, programs own the worker's folder as much as the worker does: after
        each, it must hold only the worker's own entries, as the worker left them (the C++
        build outputs, JavaScript's preload, the compile server), or the worker retires before
        the next. Its times, which a program may set for the next to read, are set back."""
        ours = (self.javac.entries() | {os.path.basename(folder) for folder in self._trusted}
                | {os.path.basename(self.case)})
        try:
            intact = (_identity(self.root) == self._root_id
                      and set(os.listdir(self.root)) <= ours
                      and all(isolation.tree_state(folder) == state
                              for folder, state in self._trusted.items())
                      and self.javac.intact())
            if intact:
                os.utime(self.root, ns=self._root_times, follow_symlinks=False)
        except OSError:
            intact = False
        if not intact:
            self.retiring = "a program changed the worker's own folder"

    def _guard_forker(self) -> None:
        """Without root, programs share the uid of the process that forks them, and so may
        change its resource limits, niceness, scheduling, I/O priority and CPUs, which later
        programs would inherit (a hard limit lowered cannot be raised again): a worker whose
        forking process changed retires after this program."""
        try:
            intact = process_settings(self.launcher.pid or 0) == self._forker_settings
        except OSError:  # the fork server is gone
            intact = False
        if not intact:
            self.retiring = ("a program changed the limits, niceness, scheduling or CPUs of its "
                             "fork server")

    def _clean(self, remove: Callable[[], object], where: str) -> None:
        """Clear what the last program left; a worker that cannot retires after this program
        (its private mounts go with it), so that nothing reaches the next one."""
        try:
            remove()
        except Exception as exc:  # noqa: BLE001 - RecursionError too (a very deep tree)
            self.retiring = f"cannot remove what a program left in {where}: {exc!r}"
            sys.stderr.write(self.retiring + "\n")

    def close(self) -> None:
        self.launcher.stop()
        self._release()

    def _release(self) -> None:
        self.javac.stop()
        if self.cgroup is not None:
            self.cgroup.remove()
        with contextlib.suppress(Exception):  # a tree too deep for rmtree stays in the tmpfs
            shutil.rmtree(self.root, ignore_errors=True)

    def run(self, language: str, source: str, limits: Limits, classpath: list[str],
            tail_at: int | None = None) -> RunResult:
        case, work = self.case, self.env["HOME"]
        refused = _unwritable(source)
        if refused is not None:
            return refused
        try:
            if not self._programs_own_root:  # (else they stay: see _pin_folders)
                os.mkdir(case, 0o711)
                os.mkdir(work, 0o700)
            if self.uid is not None:
                os.chown(work, self.uid, self.uid)
            if language == "python":
                result = self._python(source, limits, work, tail_at)
            else:
                result = self._built(language, source, limits, case, work, classpath)
            # (cut to its head and tail once plain: a cut never falls inside a folder's name)
            return replace(result, error=cap(self._plain(result.error))) if result.error else result
        except OSError as exc:
            return RunResult(SANDBOX_ERROR, self._plain(f"sandbox failure: {exc}"))
        finally:
            self._clean(lambda: self._remove_case(language), case)
            if self.uid is None and not self.retiring:
                self._guard_root()
                if not self.retiring:
                    self._guard_forker()

    def _plain(self, text: str) -> str:
        """Error text without the worker's own folders, whose names are random: the same program
        gets the same text in any worker (``program.py``, ``program.js:2``, ``<sandbox>/cxx``)."""
        work = self.env["HOME"] + os.sep
        return (text.replace("file://" + work, "").replace(work, "")
                .replace(self.case + os.sep, "").replace(self.root, "<sandbox>"))

    def _remove_case(self, language: str) -> None:
        """Remove the case folder: a Python program that left nothing but its own file, in
        three system calls (each fails if anything else is there); else the whole tree."""
        if self._programs_own_root:  # the folders stay (see _pin_folders): what is in them goes
            for folder, mode in ((self.case, 0o711), (self.env["HOME"], 0o700)):
                os.chmod(folder, mode)
                for name in os.listdir(folder):
                    if folder != self.case or name != WORKING_DIRECTORY:
                        isolation.remove_tree(os.path.join(folder, name))
                os.utime(folder, ns=self._folder_times, follow_symlinks=False)
            return
        if language == "python":
            with contextlib.suppress(OSError):
                os.unlink(self.program_path)
                os.rmdir(self.env["HOME"])
                os.rmdir(self.case)
                return
        isolation.remove_tree(self.case)

    def prepare(self, requests: Sequence[dict]) -> None:
        """Compile the Python programs of a batch of ``requests`` back to back, before any of
        them runs (:meth:`run` then takes their code): each compile finds the compiler's code
        and data still in the core's caches, where between two programs' runs it would not."""
        self._prepared = {}
        for request in requests:
            source, tail_at = request["source"], request["tail_at"]
            if request["language"] == "python" and _unwritable(source) is None:
                self._prepared[source, tail_at] = self._compiled(source, tail_at)

    def _compiled(self, source: str, tail_at: int | None) -> Compiled:
        """A Python program's verdict where its file is refused, or what its child runs: its
        source as python reads it, and its code (:func:`precompile`)."""
        path = self.program_path
        try:  # a file python's reader refuses, which compile() may take (see file_source)
            file_source(file_bytes(source), path)
        except SyntaxError as exc:
            return RunResult(SYNTAX_ERROR, _error_text(exc.with_traceback(None), source, path))
        # a byte order mark, as ``python path`` skips it (one: a second is a syntax error there)
        if source.startswith("\ufeff") and not source.startswith("\ufeff\ufeff"):
            source = source[1:]
            tail_at = tail_at - 1 if tail_at else None
        return source, precompile(source, path, tail_at) if self.launcher.compiles_here else None

    def _python(self, source: str, limits: Limits, work: str, tail_at: int | None) -> RunResult:
        compiled = self._prepared.get((source, tail_at)) or self._compiled(source, tail_at)
        if isinstance(compiled, RunResult):
            return compiled
        self._write(self.program_path, source, self.uid)  # (as given: a program may read it)
        source, code = compiled
        if isinstance(code, str):  # it does not compile: no child needed
            return RunResult(SYNTAX_ERROR, code)
        process = self._spawn(None, source, limits, limits.memory_mb, limits.timeout_s, code,
                              shared_memory=True, under_cgroup=CGROUP_DATA["python"])
        return self._verdict("python", process, limits)

    def _built(self, language: str, source: str, limits: Limits, case: str, work: str,
               classpath: list[str]) -> RunResult:
        if language == "cpp":
            error = self._cxx(languages.uses_stdcxx(source), limits)
            if error:
                return RunResult(SANDBOX_ERROR, error)
        elif language == "javascript":
            self._js_preload()
        missing = [jar for jar in classpath if not os.path.exists(jar)]
        if language == "java" and missing:
            return RunResult(SANDBOX_ERROR,
                             f"Java classpath entries {missing} do not exist; install them "
                             "(javatuples: apt-get install libjavatuples-java) or set the "
                             "classpath (pass_rate.java_classpath)")
        classes = os.path.join(case, "classes")
        try:
            recipe = languages.build(language, source, limits.memory_mb, self.cxx, classpath,
                                     classes, self.cpp_standard,
                                     os.path.join(self.js, languages.JS_PRELOAD_FILE))
        except ValueError as exc:
            return RunResult(SYNTAX_ERROR, str(exc))
        except FileNotFoundError as exc:
            return RunResult(SANDBOX_ERROR, str(exc))
        if recipe.javac_server:  # sources and classes belong to the compiler's uid
            directory, owner = classes, self.javac.uid
            os.mkdir(classes, 0o755)
        else:
            directory, owner = work, self.uid
        for name, text in recipe.files.items():  # written before the owner gets the directory
            folder = os.path.dirname(os.path.join(directory, name))
            if not os.path.isdir(folder):  # (the Java harness, in its package's folder)
                os.mkdir(folder, 0o755)
                if owner is not None:
                    os.chown(folder, owner, owner)
            self._write(os.path.join(directory, name), text, owner)
        if owner is not None:
            os.chown(directory, owner, owner)
        failed = self._compile(recipe, limits, directory)
        if failed is not None:
            return failed
        if language == "java":  # (whatever spelling of the package javac read as the harness's)
            package, _, main = languages.JAVA_HARNESS.rpartition(".")
            folder = os.path.join(classes, package)  # (a folder there is a package of its own)
            intruders = sorted(name for name in os.listdir(folder)
                               if name not in {f"{main}.java", f"{main}.class"}
                               and not os.path.isdir(os.path.join(folder, name)))
            if intruders:
                return RunResult(SYNTAX_ERROR, f"the program declares types in the test "
                                 f"harness's package {package} ({', '.join(intruders)}); give "
                                 "it another package")
        overhead = languages.RUNTIME_OVERHEAD_MB.get(language, 0)
        static = 0
        if language == "cpp":
            early = languages.code_before_the_harness(os.path.join(work, "program"))
            if early:
                return RunResult(SYNTAX_ERROR, f"{early} before the test harness starts: the "
                                 "sandbox does not run it, as its verdict could not be trusted")
            # static data over the limit: the kernel kills it in exec
            static = languages.writable_image_bytes(os.path.join(work, "program"))
            if static > (limits.memory_mb + overhead) * 2**20:
                return RunResult(MEMORY, f"the program's static data takes {static / 2**20:.0f} "
                                         f"MiB, over its memory limit of {limits.memory_mb} MiB")
        process = self._spawn(recipe.run, None, limits, limits.memory_mb + overhead,
                              limits.timeout_s, shared_memory=language in MAKE_SHARED_MEMORY,
                              under_cgroup=CGROUP_DATA.get(language, "limit"))
        return self._verdict(language, process, limits, static)

    def _compile(self, recipe: languages.Build, limits: Limits,
                 directory: str) -> RunResult | None:
        """Compile a program (in ``directory``); None when it compiled, else the verdict."""
        if recipe.compile is None:
            return None
        if recipe.javac_server:
            try:
                status, diagnostics = self.javac.compile(recipe.compile,
                                                         limits.compile_timeout_s)
            except CompileError as exc:
                return RunResult(SANDBOX_ERROR, str(exc))
            finally:
                if self.uid is None:  # the program will run as the server's user: no server
                    self.javac.stop()  # may live beside it (it could be rewritten in place)
            if status is None:
                return RunResult(TIMEOUT, diagnostics)
            diagnostics = diagnostics.replace(directory + os.sep, "")  # paths as javac's own
            return None if status == 0 else RunResult(SYNTAX_ERROR, diagnostics)
        failed = self._build(recipe.compile, limits)
        if failed is not None or recipe.link is None:
            return failed
        # the program's object, before the linker merges it: no section of the loader's
        foreign = languages.sections_of_the_loader(os.path.join(directory, "program.o"))
        if foreign:
            return RunResult(SYNTAX_ERROR, f"the program makes sections named or typed like "
                             f"those the linker makes for the dynamic loader "
                             f"({', '.join(foreign)[:200]}), which the linker would merge into "
                             "its own: the sandbox does not run it, as its verdict could not be "
                             "trusted")
        return self._build(recipe.link, limits)

    def _build(self, command: list[str], limits: Limits) -> RunResult | None:
        """Run a step of a program's build (g++ compiling or linking); None where it succeeded,
        else the verdict."""
        memory = max(limits.memory_mb, 1024) + 1024
        # (the objects and the program g++ writes are as large as its static data: they are
        # bounded by the compile's memory, as the tmpfs they go to is in its memory cgroup)
        built = self._spawn(command, None, limits, memory, limits.compile_timeout_s,
                            file_mb=memory)
        if built.timed_out or built.signal == signal.SIGXCPU:
            return RunResult(TIMEOUT, f"compiling took over {limits.compile_timeout_s} s",
                             built.escaped)
        if built.exit_code != 0:
            text = built.stderr or built.stdout
            if _BUILD_OUT_OF_ROOM.search(text):  # (static data makes objects as large)
                return RunResult(MEMORY, "the build's outputs outgrew the room the sandbox "
                                         f"gives them\n{text}", built.escaped)
            if built.oom or _BUILD_OUT_OF_MEMORY.search(text):
                return RunResult(MEMORY, f"compiling took over the {memory} MiB of memory the "
                                         f"sandbox gives it\n{text}", built.escaped)
            return RunResult(SYNTAX_ERROR, text, built.escaped)
        return None

    def _cxx(self, stdcxx: bool, limits: Limits) -> str:
        """Build, on first use, the object C++ programs link with and, when a program includes
        it, the precompiled ``<bits/stdc++.h>`` (in :attr:`cxx`); the error text, or "" when
        they are there.

        Trusted: as root, programs cannot write them; without root, :meth:`_guard_root` retires
        a worker whose copy a program touched.
        """
        steps = [(languages.CPP_MAIN + ".o", languages.compile_cpp_main, "the C++ main wrapper")]
        if stdcxx:
            steps.append((languages.PCH_NAME + ".gch", languages.precompile_stdcxx,
                          "precompiling <bits/stdc++.h>"))
        steps = [(os.path.join(self.cxx, output), command, what)
                 for output, command, what in steps
                 if not os.path.exists(os.path.join(self.cxx, output))]
        if not steps:
            return ""
        if self.cxx not in self._trusted:
            os.mkdir(self.cxx, 0o755)
        try:
            for path, command, what in steps:
                failure = self._trusted_build(command(self.cxx, self.cpp_standard), self.cxx,
                                              limits)
                if failure:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                    return f"{what} failed:\n{failure}"
        except FileNotFoundError as exc:  # no g++
            return str(exc)
        finally:  # what is there now is the worker's own (see _guard_root)
            for name in os.listdir(self.cxx):
                os.chmod(os.path.join(self.cxx, name), 0o644)
            self._trusted[self.cxx] = isolation.tree_state(self.cxx)
        return ""

    @property
    def _programs_own_root(self) -> bool:
        """Whether programs run as the user that owns the worker's folder (no root), in a
        mount namespace of the worker's."""
        return self.uid is None and self.isolation.mount_namespace

    def _pin_folders(self) -> None:
        """Without root, programs run as the user that owns the worker's folder, and could
        rename what is in it: their working directory (to a name other than node_modules, from
        which node would read a package.json of theirs as it loads JavaScript's preload in a
        worker thread), or the worker's folder (to put a file of their own at the preload's
        path). Each is a mount point of its own, made once, here, while the worker holds the
        capabilities of its user namespace (programs hold none, and cannot move a mount point),
        and the preload's folder is read-only; the working directory and the folder that holds
        it stay from program to program (emptied after each)."""
        self._js_preload()
        os.mkdir(self.case, 0o711)
        os.mkdir(self.env["HOME"], 0o700)
        status = os.lstat(self.case)
        self._folder_times = status.st_atime_ns, status.st_mtime_ns
        for folder in (self.env["HOME"], self.case, self.root):
            isolation.pin(folder)
        isolation.pin(self.js, read_only=True)

    def _js_preload(self) -> None:
        """Write JavaScript's preload (``languages.JS_PRELOAD_SOURCE``) in :attr:`js`, out of the
        programs' working directory, once, with a package.json beside it: node reads the one
        nearest the preload to tell what kind of module it is, and would otherwise go on up to
        one that a program left in /tmp (``{"type": "module"}``, or no JSON at all, which
        failed it). Trusted, as the C++ build outputs are."""
        if self.js in self._trusted:
            return
        os.mkdir(self.js, 0o755)
        self._write(os.path.join(self.js, languages.JS_PRELOAD_FILE),
                    languages.JS_PRELOAD_SOURCE, None)
        self._write(os.path.join(self.js, "package.json"), "{}\n", None)
        self._trusted[self.js] = isolation.tree_state(self.js)

    @staticmethod
    def _trusted_build(command: list[str], directory: str, limits: Limits) -> str:
        """Run a build of the sandbox's own sources; its error text, or "" when it worked."""
        import subprocess  # here, not above: it brings threading, whose handler every fork runs

        try:
            done = subprocess.run(command, cwd=directory, capture_output=True, text=True,
                                  timeout=max(120.0, limits.compile_timeout_s), check=False,
                                  env=BUILD_ENV)
        except subprocess.TimeoutExpired:
            return f"{command[0]} took too long"
        if done.returncode == 0:
            return ""
        return done.stderr[-4000:] or f"{command[0]} exited with status {done.returncode}"

    @staticmethod
    def _write(path: str, text: str, owner: int | None) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            data = memoryview(file_bytes(text))
            while data:
                data = data[os.write(fd, data):]
            if owner is not None:
                os.fchown(fd, owner, owner)
        finally:
            os.close(fd)

    def _spawn(self, argv: list[str] | None, source: str | None, limits: Limits,
               memory_mb: int, timeout_s: float, code: bytes | None = None,
               file_mb: int | None = None, shared_memory: bool = False,
               under_cgroup: str = "limit") -> Process:
        """Run ``argv`` (or, when None, the Python ``source``, whose ``code`` is from
        :func:`precompile`) in an isolated child; files up to ``file_mb`` (the limits');
        ``shared_memory``: a program that can make shared memory (see
        :data:`ADDRESS_SPACE_ROOM_MB`); ``under_cgroup``: its RLIMIT_DATA where there is a memory
        cgroup, ``"limit"``, ``"room"`` or ``"none"`` (:data:`CGROUP_DATA`)."""
        oom_before = self.cgroup.prepare(memory_mb) if self.cgroup is not None else 0
        self._count_sockets()  # (the compile server's, where one runs)
        bound = shared_memory and self.cgroup is None
        data = memory_mb * 2**20
        if self.cgroup is not None and under_cgroup != "limit":
            data = (memory_mb + ADDRESS_SPACE_ROOM_MB) * 2**20 if under_cgroup == "room" else 0
        rlimits: Rlimits = (data, int(timeout_s) + 1,
                            (file_mb or limits.file_mb) * 2**20, limits.open_files,
                            limits.processes,
                            (memory_mb + ADDRESS_SPACE_ROOM_MB) * 2**20 if bound else 0)
        try:
            status, timed_out, report, token, stdout, stderr, strays, failure, untouched = (
                self.launcher.launch((argv, source, code, rlimits, timeout_s)))
        except OSError as exc:
            server_gone = isinstance(exc, LauncherError)  # and with it what it knew
            if server_gone:
                self.retiring = str(exc)
            escaped = self.sweep()  # what it started is the worker's to kill
            oom = server_gone and self._oom_killed_since(oom_before)
            self._reclaim()
            self._record_clean()
            if oom:  # the OOM killer chose the server: the program lowered its processes' scores
                return Process(signal.SIGKILL, False, b"", b"", "",
                               "the memory cgroup's OOM killer ended the fork server: the "
                               "program's processes together exceeded its memory limit",
                               escaped, True, "")
            raise
        clean = self._clean_state
        if clean is not None and clean.unchanged():  # the program left nothing: no sweep
            escaped, oom = strays, False
        else:
            escaped = strays + self.sweep()
            oom = self._oom_killed_since(oom_before)
            self._reclaim()
            self._record_clean()
        return Process(status, timed_out, report, token, stdout, stderr, escaped, oom,
                       failure.decode("utf-8", "replace"), untouched)

    def _count_sockets(self) -> None:
        """Note the sockets the worker's network namespace holds before a program starts (its
        servers' own), down to which the sweep after it collects what the program left."""
        if self._sockets is None:
            return
        if self._clean_state is not None:  # (read once: for the check, and the sweep after it)
            self._clean_state.begin()
        else:
            self._sockets_before = isolation.socket_count(self._sockets)

    def _sockets_before_program(self) -> int:
        """What :meth:`_count_sockets` found before the last program."""
        if self._clean_state is None:
            return self._sockets_before
        return self._clean_state.sockets_before()

    def _reclaim(self) -> None:
        """Take back what the program left charged to the memory cgroup, once its OOM kills
        are counted (v1 reclaims under a lower limit, which is not the program's)."""
        if self.cgroup is not None:
            self._clean(self.cgroup.reclaim_leftover, "its memory cgroup")

    def _oom_killed_since(self, before: int) -> bool:
        """Whether the memory cgroup's OOM killer killed since its counter read ``before``."""
        return self.cgroup is not None and self.cgroup.oom_kills() > before

    def _verdict(self, language: str, process: Process, limits: Limits,
                 static: int = 0) -> RunResult:
        """The verdict on a program that ran; ``static``: the bytes of a C++ program's static
        data (:func:`languages.writable_image_bytes`)."""
        def result(outcome: str, error: str) -> RunResult:
            return RunResult(outcome, error, process.escaped)

        stderr = process.stderr
        if process.timed_out or process.signal == signal.SIGXCPU:
            return result(TIMEOUT, f"exceeded {limits.timeout_s} s\n{stderr}")
        if process.completed:
            return result(PASSED, "")
        kind = process.kind
        if kind not in _HARNESS_REPORTS[language]:  # (one the program sent with a key it read)
            kind = b""
        if process.failure:
            return result(SANDBOX_ERROR, process.failure)
        if kind == b"S":
            return result(SYNTAX_ERROR, stderr)
        report = _OUT_OF_MEMORY.get(language)
        said = (report is not None and report.search(stderr) is not None
                and (process.signal == signal.SIGABRT  # (V8's "Fatal javascript OOM": a trap)
                     or (language == "javascript" and process.signal == signal.SIGTRAP)
                     or (language == "java" and process.untouched)))
        if kind == b"M" or said:
            return result(MEMORY, stderr)
        if process.oom:
            return result(MEMORY, f"killed by the kernel's OOM killer: the program's processes "
                                  f"used their memory limit ({limits.memory_mb} MiB)\n{stderr}")
        number = process.signal
        # static data within STARTUP_ROOM of the limit: the libraries and the first allocations
        # did not fit, and the kernel (or the loader) ended the program before it started
        if static > limits.memory_mb * 2**20 - STARTUP_ROOM and process.untouched and (
                number in (signal.SIGSEGV, signal.SIGKILL)
                or (process.exit_code == 127 and _LIBRARIES_OUT_OF_ROOM in stderr)):
            return result(MEMORY, f"the program's static data ({static / 2**20:.0f} MiB) leaves "
                                  f"too little of its memory limit ({limits.memory_mb} MiB) to "
                                  f"start\n{stderr}")
        if number is not None:
            if language == "cpp" and number == signal.SIGABRT and _CXX_FAILURE.search(stderr):
                return result(FAILED, stderr)
            return result(CRASH, f"killed by {_signal_name(number)}\n{stderr}")
        compiled = _JS_SYNTAX_ERROR.search(stderr) if language == "javascript" else None
        if compiled and "program.js" not in compiled.group(1):
            return result(SYNTAX_ERROR, stderr)
        if process.exit_code == 0 and kind != b"E":  # (E: JavaScript's error after the token)
            return result(FAILED, f"exited with status 0 before its tests completed\n{stderr}")
        return result(FAILED, stderr or f"exit status {process.exit_code}")


def main() -> None:
    config, code = json.loads(sys.argv[1]), int(sys.argv[2])
    os.umask(0o022)  # what the worker makes, programs of another uid must reach (mode 0o755)
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        worker = Worker(config["uid"], config["allow_network"], config["preload"],
                        config["homes"], code, replies, config["cpp_standard"],
                        config["java_classpath"], config["workers"])
    except BaseException as exc:
        write_message(replies, {"error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from exc
    finally:
        os.close(code)
    write_message(replies, {"isolation": worker.isolation.as_dict(), "problems": worker.problems})
    limits: tuple[dict, Limits] | None = None  # the last limits, made once while they last
    patience_s = config["batch_patience_s"]  # (see pool.BATCH_PATIENCE_S)
    going = True
    try:
        while going:
            try:
                batch = read_message(requests)
            except LauncherError:  # the end of stdin: the pool is done with this worker
                break
            worker.prepare(batch)
            if len(batch) > 1:  # (a death or hang from here on is a program's own)
                write_message(replies, BATCH_COMPILED)
            for position, request in enumerate(batch, start=1):  # (a reply each, until it stops)
                if worker.launcher_died():  # nothing runs: the pool gives it to a fresh worker
                    write_message(replies, {"unrun": "the fork server died between programs"})
                    going = False
                    break
                if limits is None or request["limits"] != limits[0]:
                    limits = request["limits"], Limits(**request["limits"])
                started = time.monotonic()
                result = worker.run(request["language"], request["source"], limits[1],
                                    request["java_classpath"], request["tail_at"])
                reply = result.as_dict()
                if worker.retiring:
                    reply["retire"] = worker.retiring
                elif position < len(batch) and time.monotonic() - started > patience_s:
                    reply["deferred"] = True  # the rest go back to the pool's queue
                write_message(replies, reply)
                going = not worker.retiring
                if not going or "deferred" in reply:
                    break
    finally:
        worker.close()
    # Nothing is left to finalize (replies go out unbuffered, the log is stderr): the
    # interpreter's own teardown would hold the pool's close up by ~25 ms a worker.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
