"""The host side: a pool of sandbox workers, one per core, and the result cache.

Each worker is a separate process started with a clean environment (no secret of the caller's
environment reaches it) that owns one unprivileged uid, claimed by a lock on a file of root's
(:data:`CLAIMS`), so that two sandboxes on one machine never share a uid (the escapee sweep kills
every process of its uid, and the uid names its memory cgroup); only those that cannot see each
other's claims (containers of their own) may, seldom (see :func:`_claim_uid`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import pwd
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hybridmetric.sandbox._boot import compiled_modules
from hybridmetric.sandbox.cache import ResultCache, cache_key
from hybridmetric.sandbox.cgroup import cgroup_name, remove_leftover
from hybridmetric.sandbox.isolation import Isolation, start_socket_collector
from hybridmetric.sandbox.javac import UID_OFFSET
from hybridmetric.sandbox.languages import (
    CPP_STANDARD,
    DEFAULT_JAVA_CLASSPATH,
    SEARCH_PATH,
    canonical,
    cxx_flags,
    tool,
)
from hybridmetric.sandbox.launcher import (
    BATCH_COMPILED,
    INTERPRETER_OPTIONS,
    MessageReader,
    NoAnswerInTime,
    write_message,
)
from hybridmetric.sandbox.limits import SANDBOX_ERROR, Limits, RunResult
from hybridmetric.signature import say

#: A tool's version in the first line of what it says of itself (``v20.11.1``, ``g++ (Ubuntu
#: 13.2.0-23ubuntu4) 13.2.0``, ``openjdk version "21.0.5" 2024-10-15``).
_VERSION = re.compile(r"\d+(\.\d+)+")
UID_BASE = 61000
UID_SLOTS = 1000
#: Where sandboxes claim their uids, each by a lock on a file of its own, in a folder of root's
#: alone (an abstract socket's name, the claim before, is seen in one network namespace alone, so
#: a sandbox under ``unshare -n`` took the same uid, and with it the same memory cgroup; and any
#: user may bind one: a user could block every uid, or have the sandbox take the user's own and
#: trace its programs, red team). It is ``/run`` as PID 1 sees it (``/proc/1/root``), where this
#: process may look there: sandboxes in mount namespaces of their own, with a ``/run`` of their
#: own (``bwrap --tmpfs /run``), then claim in one place.
CLAIMS = "run/hybridmetric-sandbox-uids"
#: Verdicts are written to the cache in batches of this size (and whatever is left at the end).
SAVE_EVERY = 32
#: Programs a worker is sent at once, at most: fewer as the queue runs low, so that no worker
#: waits long while another still holds programs that have not started.
BATCH = 8
#: Seconds a program of a batch may take before its worker gives back those after it (to the
#: front of the queue, for whichever worker is free first): the rest of a batch waits behind
#: one slow program at most, not behind each slow program of the batch in turn.
BATCH_PATIENCE_S = 0.05
#: How long the pool waits for a worker, beyond twice a program's own time limits (its run's
#: and its compile's; see :func:`answer_deadline`), and for a new worker to start: room for
#: what a worker does once (start its fork server with the ``preload`` modules; build the C++
#: main wrapper and precompiled header, the Java compile server: up to 120 s each) and for the
#: kill rounds. A safety net for work on the worker's side that no limit of the program's
#: bounds: a worker that has not answered by then is killed and replaced, and its program gets
#: a ``sandbox_error`` (never cached), not an endless wait.
ANSWER_ALLOWANCE_S = 600.0


def answer_deadline(limits: Limits) -> float:
    """Seconds the pool waits for a worker's verdict on a program with ``limits``."""
    return 2 * (limits.timeout_s + limits.compile_timeout_s) + ANSWER_ALLOWANCE_S


@dataclass(frozen=True)
class Program:
    """One complete program to run: for a ``tests`` case, prefix + candidate + suffix +
    case (the case on a line of its own: ``pass_rate.own_line``).

    ``tail_at``: where the part of ``source`` that other programs share begins (the case, the
    same after each candidate of a task), if any. A Python worker then compiles that part once
    for them all (where the two parts compile on their own as within the whole; see
    ``compiling.precompile``). It changes no verdict: it is not part of the cache's key.
    """

    language: str
    source: str
    limits: Limits = field(default_factory=Limits)
    tail_at: int | None = None

    def __post_init__(self) -> None:
        if self.tail_at is not None and not (
                type(self.tail_at) is int and 0 <= self.tail_at <= len(self.source)):
            raise ValueError(f"tail_at must be a position in the source (0 to "
                             f"{len(self.source)}), got {self.tail_at!r}")


def _claims_folder() -> tuple[int, str]:
    """The folder of :data:`CLAIMS` (made where missing, open) and its path: under PID 1's root,
    else (where this process may not look there, or PID 1's ``/run`` is read-only) under this
    process's; RuntimeError where it is not root's alone (anyone else could hold its locks, or
    replace its files) or neither can be made (a read-only ``/run``: ``docker run
    --read-only``), or PID 1's fails otherwise (full: claims split between two places are
    none). Never in a folder anyone may write (``/tmp``, ``/dev/shm``): a user there made two
    sandboxes claim in two places, and take one uid (red team)."""
    failures = []
    for root in ("/proc/1/root", "/"):
        path = os.path.join(root, CLAIMS)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
            folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            failures.append(f"{path}: {exc.strerror}")
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT):
                continue
            break
        status = os.fstat(folder)
        if status.st_uid != 0 or status.st_mode & 0o077:
            os.close(folder)
            raise RuntimeError(f"{path}, where sandboxes claim their uids, must be a folder of "
                               "root's that no one else may use (mode 0700): remove it")
        return folder, path
    raise RuntimeError("the sandbox claims its uids in a folder of root's, which it could make "
                       f"nowhere ({'; '.join(failures)}): make /run writable for root (in a "
                       "container: --tmpfs /run; a systemd service: "
                       f"ReadWritePaths=/{CLAIMS})")


def _uids_in_use() -> set[int]:
    """The uids of the processes this process sees."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):  # (gone)
                found.add(os.stat(f"/proc/{entry}").st_uid)
    return found


def _named(uid: int) -> bool:
    """Whether the user database names ``uid`` (an account of the machine's)."""
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _first_slot() -> int:
    """Where this process's search for a uid starts: a hash of its PID and mount namespaces'
    numbers."""
    namespaces = [os.stat(f"/proc/self/ns/{kind}").st_ino for kind in ("pid", "mnt")]
    return int.from_bytes(hashlib.blake2b(repr(namespaces).encode()).digest()[:8]) % UID_SLOTS


def _claim_uid() -> tuple[int, int]:
    """Claim a free sandbox uid: the uid, and the descriptor of its locked claim (released once
    closed in this process and in the workers that inherit it). A uid is free where no sandbox
    holds its claim and neither it nor its compile server's (``+ UID_OFFSET``) is an account of
    the machine's or runs a process here (whose owner could trace the programs). The search
    starts at a slot of this process's PID and mount namespaces' own (a hash of their numbers),
    so that sandboxes that claim in different places (containers of their own, or a ``/run`` of
    their own where PID 1's is closed to them) seldom take the same uid: the kernel counts
    processes per uid across them all, and sandboxes in one memory cgroup would share the uid's
    cgroup."""
    folder, path = _claims_folder()
    try:
        busy, first = _uids_in_use(), _first_slot()
        for slot in range(UID_SLOTS):
            uid = UID_BASE + (first + slot) % UID_SLOTS
            if {uid, uid + UID_OFFSET} & busy or _named(uid) or _named(uid + UID_OFFSET):
                continue
            try:
                claim = os.open(f"uid-{uid}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                                | os.O_CLOEXEC, 0o600, dir_fd=folder)
            except OSError as exc:
                raise RuntimeError(f"the sandbox cannot claim uid {uid} in {path}: {exc}; "
                                   "make it writable for root, or remove it") from exc
            try:
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(claim)
                continue
            return uid, claim
    finally:
        os.close(folder)
    raise RuntimeError(f"all {UID_SLOTS} sandbox uids from {UID_BASE} are in use, each by a "
                       "worker of a sandbox on this machine, an account or a process: use fewer "
                       "workers, or wait for the other sandboxes to end")


def homes() -> list[str]:
    """The user's home folders, which programs run without root must not read: ``$HOME``, and
    the account's own (a caller's ``HOME`` may name another: CI, cron, a service), where they
    differ."""
    found = [os.path.expanduser("~")]
    with contextlib.suppress(KeyError):  # (a uid with no account)
        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    return list(dict.fromkeys(found))


class _Worker:
    """One worker process and the pipe protocol to it: the config as JSON on its command line
    (and the descriptor of the sandbox's compiled modules: see ``_boot.py``), then messages
    (``marshal``, length first; see ``launcher.write_message``): on its stdin a batch of
    requests (a list), on its stdout :data:`launcher.BATCH_COMPILED` once it compiled a batch
    of two or more, and a reply for each program until it stops (see :meth:`run`)."""

    def __init__(self, allow_network: bool, preload: Sequence[str], cpu: int | None,
                 cpp_standard: str, java_classpath: Sequence[str] = (),
                 allow_file_writes: bool = False, peers: int = 1):
        self.allow_network, self.preload, self.cpu = allow_network, list(preload), cpu
        self.peers = peers  # the sandbox's workers, this one among them
        self.allow_file_writes = allow_file_writes
        self.cpp_standard, self.java_classpath = cpp_standard, list(java_classpath)
        self.uid: int | None = None
        self._claim: int | None = None
        if os.getuid() == 0:
            self.uid, self._claim = _claim_uid()
        self.process: subprocess.Popen[bytes] | None = None
        self.replies: MessageReader | None = None  # (its stdout's)
        self.retired = False  # it asked to be replaced before its next program
        self.interrupted = False  # killed by interrupt(): no program of it gets a verdict
        self.busy = False  # a program of it is running
        self.isolation: Isolation | None = None
        self.problems: list[str] = []

    def start(self) -> None:
        config = {"uid": self.uid, "allow_network": self.allow_network, "preload": self.preload,
                  "cpp_standard": self.cpp_standard, "java_classpath": self.java_classpath,
                  "homes": homes(),  # hidden from programs run without root
                  "workers": self.peers, "batch_patience_s": BATCH_PATIENCE_S}
        env = {"PATH": SEARCH_PATH, "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        code = compiled_modules()
        self.process = subprocess.Popen(
            [sys.executable, *INTERPRETER_OPTIONS, str(Path(__file__).with_name("_boot.py")),
             json.dumps(config), str(code)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
            start_new_session=True,
            # the uid stays claimed while the worker lives, even past this process
            pass_fds=(code,) if self._claim is None else (code, self._claim),
            cwd="/",  # not the caller's: its compile server's /proc/PID/cwd would show it
        )
        assert self.process.stdout is not None
        self.replies = MessageReader(self.process.stdout.fileno())
        if self.cpu is not None:  # from its start (its servers and programs inherit it)
            with contextlib.suppress(ProcessLookupError):  # (dead already: see handshake)
                os.sched_setaffinity(self.process.pid, {self.cpu})

    def handshake(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        try:
            assert self.replies is not None
            hello = self.replies.read(ANSWER_ALLOWANCE_S)
        except NoAnswerInTime:
            self.process.kill()
            raise RuntimeError(f"sandbox worker did not start within {ANSWER_ALLOWANCE_S:.0f} "
                               f"s:\n{self.log_tail()}") from None
        except OSError:
            raise RuntimeError(f"sandbox worker failed to start:\n{self.log_tail()}") from None
        if "error" in hello:
            raise RuntimeError(f"sandbox worker failed to start: {hello['error']}\n"
                               "(check the `preload` modules are installed)")
        self.isolation = Isolation(**hello["isolation"])
        self.problems = hello["problems"]
        if self.isolation.uid is not None and not self.isolation.mount_namespace:
            raise RuntimeError(
                "the sandbox drops to an unprivileged uid but could not build its private mounts ("
                + "; ".join(self.problems) + "); programs would run half-isolated, so none is run"
            )
        if not self.allow_network and not self.isolation.network_blocked:
            raise RuntimeError(
                "no way to block the network works on this machine ("
                + "; ".join(self.problems) + "). Run as root or where unprivileged network "
                "namespaces or seccomp are allowed, or accept the risk explicitly with "
                "allow_network=True (--set pass_rate.allow_network=true)."
            )
        if (self.isolation.uid is None and not self.isolation.read_only
                and not self.allow_file_writes):
            raise RuntimeError(
                "programs would run as you, free to change your files and the sandbox's own "
                "(a program could forge its pass), as no read-only file system could be made for "
                "them here (" + "; ".join(self.problems) + "). Run as root or where "
                "unprivileged user namespaces are allowed (sysctl "
                "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 and later, "
                "kernel.apparmor_restrict_unprivileged_userns=0), or accept the risk explicitly "
                "with allow_file_writes=True (--set pass_rate.allow_file_writes=true)."
            )

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:].decode("utf-8", "replace")

    def run(self, programs: Sequence[Program],
            java_classpath: Sequence[str]) -> Iterator[RunResult]:
        """Verdicts on ``programs``, in order, as they come: one request for them all (the
        worker compiles their Python back to back, says so, then runs them: see
        ``Worker.prepare``), a reply for each. What a worker that stops leaves unrun, a fresh
        one runs; where a worker dies or hangs while it compiles them, each is run again on its
        own, so that the verdict falls on the program that caused it. Ends early where the
        worker gives back the rest (see :data:`BATCH_PATIENCE_S`), and after a program cut
        short by :meth:`interrupt`; closed before its end, it kills a worker that still has
        programs of the batch to run (a fresh one runs the next)."""
        unrun_once: set[int] = set()  # (a program a worker left unrun runs once more)
        at = 0
        while at < len(programs):
            if self.retired or self.interrupted:  # (killed by interrupt() after its last reply)
                self.retired = False
                self._restart()
            batch, answer, late = programs[at:], None, False
            self.busy = True
            try:
                compiled = len(batch) == 1  # (a program alone is its own to blame)
                if self._send(batch, java_classpath):
                    if not compiled:
                        compiled, late = self._answer(None)
                    while compiled and at < len(programs):
                        answer, late = self._answer(programs[at])
                        if answer is None:
                            break
                        # it could not clear what this program left: a fresh one takes over
                        self.retired = bool(answer.pop("retire", ""))
                        deferred = answer.pop("deferred", False)
                        if "unrun" in answer:  # nothing ran: a fresh worker runs it (once)
                            self.retired = True
                            if at in unrun_once:
                                yield RunResult(SANDBOX_ERROR,
                                                f"sandbox failure: {answer['unrun']}")
                                at += 1
                            else:
                                unrun_once.add(at)
                            break
                        try:
                            yield RunResult(**answer)
                        except GeneratorExit:  # (the caller stopped reading: the run stopped)
                            if (at + 1 < len(programs) and not (deferred or self.retired)
                                    and self.process is not None):
                                self.process.kill()  # (its replies would meet the next run)
                                self.retired = True
                            raise
                        at += 1
                        if self.retired:  # it stops: the rest go to a fresh one
                            break
                        if deferred:  # the rest go back to the queue (see Sandbox.run)
                            return
            finally:
                self.busy = False
            if answer is not None:
                continue
            if self.interrupted:  # (a fresh one takes over if this sandbox runs anything again)
                self.retired = True
                yield RunResult(SANDBOX_ERROR, "interrupted: the program was stopped unfinished")
                return
            if not compiled:  # it may have died compiling any of them, or none
                self._restart()
                for program in batch:
                    yield from self.run([program], java_classpath)
                    if self.interrupted:
                        return
                return
            error = self._failure(programs[at], late)  # (its log: before the restart)
            self._restart()
            yield RunResult(SANDBOX_ERROR, error)
            at += 1

    def _send(self, batch: Sequence[Program], java_classpath: Sequence[str]) -> bool:
        """Send the requests for ``batch``; False where the worker is gone."""
        assert self.process is not None and self.process.stdin
        requests = [{"language": program.language, "source": program.source,
                     "limits": program.limits.as_dict(), "java_classpath": list(java_classpath),
                     "tail_at": program.tail_at} for program in batch]
        try:
            write_message(self.process.stdin.fileno(), requests)
        except OSError:  # a broken pipe
            return False
        return True

    def _answer(self, program: Program | None) -> tuple[Any, bool]:
        """The worker's reply on ``program``, or (None) whether it said it compiled a batch;
        None (False) where it died, gave none in time or said something else (it is then
        killed), and whether it was late."""
        assert self.process is not None and self.replies is not None
        deadline = ANSWER_ALLOWANCE_S if program is None else answer_deadline(program.limits)
        try:
            answer = self.replies.read(deadline)
        except NoAnswerInTime:  # killed, and with it the program (see interrupt)
            self.process.kill()
            return None, True
        except OSError:  # a broken pipe, or the end of its stdout
            return None, False
        if program is None and answer != BATCH_COMPILED:  # (out of step: it goes)
            self.process.kill()
            return False, False
        return True if program is None else answer, False

    def _failure(self, program: Program, late: bool) -> str:
        """Why a worker gave no verdict on ``program``."""
        if late:
            return (f"sandbox failure: the sandbox worker gave no verdict within "
                    f"{answer_deadline(program.limits):.0f} s (twice the program's time limits, "
                    f"run and compile, and {ANSWER_ALLOWANCE_S:.0f} s more); it was replaced\n"
                    f"{self.log_tail()}")
        return f"sandbox worker died:\n{self.log_tail()}"

    def interrupt(self) -> None:
        """Kill the worker and, with it, its program (Ctrl-C: nobody waits for a verdict)."""
        self.interrupted = True
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()

    def _restart(self) -> None:
        self.stop()
        self.start()
        self.handshake()

    def hang_up(self) -> None:
        """Close its requests: it finishes, cleans up and exits (see :meth:`stop`)."""
        with contextlib.suppress(OSError):
            if self.process is not None and self.process.stdin:
                self.process.stdin.close()

    def stop(self) -> None:
        if self.process is None:
            return
        self.hang_up()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.log.close()
        # a worker killed before it could clean up (interrupted, or dead) leaves its memory
        # cgroup, empty once its programs are gone, and what they left in flight in Unix
        # sockets, which the kernel frees once its collector runs (red team)
        remove_leftover(cgroup_name(self.uid, self.process.pid))
        with contextlib.suppress(OSError):  # (no room left to send one: the user's budget)
            start_socket_collector()
        self.process = None
        self.interrupted = False

    def close(self) -> None:
        self.stop()
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None


class _Jobs:
    """The programs a run has yet to run, shared by the pool's threads. Each thread takes a
    batch for its worker (:data:`BATCH`, fewer as the queue runs low) and says when it is
    done with it, giving back, to the front, what its worker left unrun; a thread that finds
    the queue empty waits while another may still give some back."""

    def __init__(self, items: Iterable[tuple[str, Program]], workers: int):
        self._queue = deque(items)
        self._workers = workers
        self._held = 0  # programs taken and not yet done with
        self._changed = threading.Condition()
        self.stopped = False

    def take(self) -> list[tuple[str, Program]]:
        """The next batch; empty once every program is done with, or the run stopped."""
        with self._changed:
            while not self.stopped:
                if self._queue:
                    count = min(len(self._queue),
                                max(1, min(BATCH, len(self._queue) // (4 * self._workers))))
                    self._held += count
                    return [self._queue.popleft() for _ in range(count)]
                if not self._held:
                    break
                self._changed.wait()
            return []

    def done(self, batch: list[tuple[str, Program]], ran: int) -> None:
        """Done with ``batch``, of which the first ``ran`` have their verdicts (the rest go
        back, unless the run stopped)."""
        with self._changed:
            self._held -= len(batch)
            if ran < len(batch) and not self.stopped:
                self._queue.extendleft(reversed(batch[ran:]))
            self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self.stopped = True
            self._changed.notify_all()


def _stamp(path: str) -> str:
    """A file's size and modification time (``missing`` when it is not there)."""
    try:
        info = os.stat(path)
    except OSError:
        return "missing"
    return f"{info.st_size}@{info.st_mtime_ns}"


def _close_all(workers: list[_Worker]) -> None:
    for worker in workers:  # all at once: each then exits while the others do
        worker.hang_up()
    for worker in workers:
        worker.close()


class Sandbox:
    """Runs untrusted programs in isolated workers, ``workers`` at a time (0: one per core this
    process may use).

    ``preload`` lists modules every Python worker imports once (numpy, pandas, ...), so a
    program that imports them pays nothing. ``cache`` is a SQLite path for verdicts, or None.
    ``java_classpath``: jars Java programs compile and run against (a missing one is a
    sandbox error when a Java program runs). ``cpp_standard``: what C++ programs compile as
    (g++'s ``-std=``; MultiPL-E's ``c++17`` unless told). ``pin_cpus``: each worker starts its
    servers and programs on one of the CPUs this process may use (worker *i* on the *i*-th, round
    robin), so the hand-offs between worker, fork server and program never cross cores (about
    15% more programs per second on 2 cores). A program may widen its own affinity (nothing
    stops it), and the JVM's and node's helper threads share their program's core. Turn it off
    on a machine whose cores other work keeps busy, where a pinned worker could not move away.
    ``allow_network`` and ``allow_file_writes``: run where the network cannot be blocked, or
    (without root) where programs, which then run as the caller, could change the caller's files,
    which the sandbox otherwise refuses to do.
    """

    def __init__(self, *, workers: int = 0, allow_network: bool = False,
                 preload: Sequence[str] = (), cache: str | Path | None = None,
                 java_classpath: Sequence[str] = DEFAULT_JAVA_CLASSPATH, pin_cpus: bool = True,
                 cpp_standard: str = CPP_STANDARD, allow_file_writes: bool = False):
        cxx_flags(cpp_standard)  # (ValueError for what names no standard)
        cpus = sorted(os.sched_getaffinity(0))  # the cores this process may use
        count = workers or len(cpus)
        if not 1 <= count <= UID_SLOTS:
            raise ValueError(f"workers must be 1 to {UID_SLOTS} (or 0 for one per core), got "
                             f"{workers}")
        self.allow_network = allow_network
        self.java_classpath = list(java_classpath)
        self.preload = list(preload)
        self.cpp_standard = cpp_standard
        self.cache = ResultCache(cache) if cache is not None else None  # first: it may not open
        self._runtimes: dict[str, str] = {}
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _close_all, self._workers)
        try:
            for i in range(count):  # (each claims its uid: released by close() if one fails)
                self._workers.append(_Worker(allow_network, preload,
                                             cpus[i % len(cpus)] if pin_cpus else None,
                                             cpp_standard, self.java_classpath,
                                             allow_file_writes, count))
            for worker in self._workers:
                worker.start()
            for worker in self._workers:
                worker.handshake()
        except BaseException:
            self.close()
            raise

    def runtime(self, language: str) -> str:
        """What runs ``language``'s programs here, with its version and what else reaches them
        (the modules the Python fork server preloads, the size and time of each Java jar, the C++
        standard): part of a cached verdict's key, so that a new Python, node, g++, JDK or jar
        runs the programs again."""
        if language not in self._runtimes:
            if language == "python":  # the interpreter the workers run (sys.executable)
                found = f"python {sys.version} preload={','.join(sorted(self.preload))}"
            else:
                command = {"javascript": ["node", "--version"], "cpp": ["g++", "--version"],
                           "java": ["java", "-XX:-UsePerfData", "-version"]}[language]
                try:
                    done = subprocess.run([tool(command[0]), *command[1:]], capture_output=True,
                                          text=True, timeout=60, check=True,
                                          env={"PATH": SEARCH_PATH, "LANG": "C.UTF-8"})
                    found = f"{command[0]} {(done.stdout + done.stderr).strip()}"
                except (OSError, subprocess.SubprocessError) as exc:
                    # its programs end in sandbox_error, which is never cached
                    found = f"{command[0]} unavailable: {exc}"
                if language == "java" and self.java_classpath:
                    found += " " + self._jar_stamps()
                if language == "cpp":
                    found += f" -std={self.cpp_standard}"
            self._runtimes[language] = found
        return self._runtimes[language]

    def toolchains(self) -> dict[str, str]:
        """The version of node, g++ and the JDK here ("none" where one is missing), and a hash of
        the Java jars (their paths, sizes and times): for a signature, as a program that passes
        under one version can fail under another (``Array.prototype.toSorted``, node 20)."""
        found = {}
        for name, language in (("node", "javascript"), ("gxx", "cpp"), ("java", "java")):
            first = self.runtime(language).partition("\n")[0]
            version = None if " unavailable: " in first else _VERSION.search(first)
            found[name] = version.group(0) if version else "none"
        if self.java_classpath:
            found["java_jars"] = hashlib.sha256(self._jar_stamps().encode()).hexdigest()[:12]
        return found

    def _jar_stamps(self) -> str:
        """``path:size@time`` of each Java jar, in the classpath's order."""
        return " ".join(f"{jar}:{_stamp(jar)}" for jar in self.java_classpath)

    @property
    def uids(self) -> list[int]:
        """The unprivileged uids its programs run as (empty when not root)."""
        return [w.uid for w in self._workers if w.uid is not None]

    @property
    def isolation(self) -> Isolation:
        found = self._workers[0].isolation
        assert found is not None
        return found

    def run(self, programs: Sequence[Program],
            progress: Callable[[int], None] | None = None) -> list[RunResult]:
        """Verdicts for ``programs``, in order. Identical programs run once."""
        languages = {p.language: canonical(p.language) for p in programs}
        runtimes = {name: self.runtime(name) if self.cache is not None else ""
                    for name in set(languages.values())}
        walls = self.isolation.walls
        keys = [cache_key(languages[p.language], p.source, p.limits, self.allow_network,
                          self.java_classpath, walls, runtimes[languages[p.language]])
                for p in programs]
        known = self.cache.get_many(keys) if self.cache is not None else {}
        pending: dict[str, Program] = {}
        for key, program in zip(keys, programs, strict=True):
            if key not in known and key not in pending:
                pending[key] = replace(program, language=languages[program.language])
        jobs = _Jobs(pending.items(), len(self._workers))
        fresh: dict[str, RunResult] = {}
        unsaved: list[tuple[str, RunResult]] = []
        lock = threading.Lock()
        failures: list[BaseException] = []

        def save() -> None:  # under ``lock``: verdicts reach the cache as they come
            try:
                if self.cache is not None and unsaved:
                    self.cache.put_many(unsaved)
            except sqlite3.Error as exc:  # the verdicts still count; only the cache is lost
                say(f"hybridmetric: the verdict cache {self.cache.path} cannot be written "
                    f"({exc}); going on without it")
                self.cache.close()
                self.cache = None
            finally:
                unsaved.clear()

        def drain(worker: _Worker, done: threading.Event) -> None:
            try:
                while batch := jobs.take():
                    ran = 0
                    try:
                        with contextlib.closing(worker.run([program for _, program in batch],
                                                           self.java_classpath)) as results:
                            for result in results:
                                key, ran = batch[ran][0], ran + 1
                                with lock:
                                    fresh[key] = result
                                    unsaved.append((key, result))
                                    if len(unsaved) >= SAVE_EVERY:
                                        save()
                                    if progress is not None:
                                        progress(len(fresh))
                                if jobs.stopped:  # (what is left of the batch is not run)
                                    break
                    finally:
                        jobs.done(batch, ran)
            except BaseException as exc:
                failures.append(exc)
                jobs.stop()
            finally:
                done.set()

        # Waited for through events, not Thread.join: a join that Ctrl-C interrupts leaves
        # Python 3.11 calling the thread ended while it still runs.
        ends: list[threading.Event] = []
        interrupted = False
        try:
            for worker in self._workers:
                ends.append(threading.Event())
                threading.Thread(target=drain, args=(worker, ends[-1]), daemon=True).start()
            for end in ends:
                end.wait()
        except BaseException:  # Ctrl-C: the programs still running are stopped, not waited for
            interrupted = True
            raise
        finally:  # what finished stays in the cache
            jobs.stop()
            with lock:
                save()
            for end in ends:
                while not end.wait(0.05):
                    for worker in self._workers if interrupted else ():
                        if worker.busy and not worker.interrupted:
                            worker.interrupt()
            with lock:
                save()
        if failures:
            raise failures[0]
        known.update(fresh)
        return [known[key] for key in keys]

    def close(self) -> None:
        self._finalizer()
        if getattr(self, "cache", None) is not None:
            self.cache.close()
            self.cache = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
