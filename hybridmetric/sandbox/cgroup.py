"""A memory cgroup per worker, so that a program's whole process tree shares one memory limit.

RLIMIT_DATA caps each process; a program that forks (up to the process limit) could still take
that much memory many times over. Where the sandbox may create cgroups (root, with the memory
controller in cgroup v1 or v2), each worker makes one below its own cgroup, sets the program's
limit before each run, and reads the kernel's OOM-kill counter afterwards: a kill there is the
``memory`` outcome. Its fork server joins it, so that every program is born inside (see
``launcher.Forker``). The limits of the cgroups above it still apply. Elsewhere the sandbox runs
with rlimits alone and says so (``Isolation.memory_cgroup``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class _Layout:
    """Where a cgroup version keeps its files: the memory limit, the limit on memory plus swap
    (v1; v2 gets ``memory.swap.max = 0``), the OOM-kill counter, the memory charged, the line
    of ``memory.stat`` that counts the page cache in it, and where to ask for memory back (v2;
    v1: a limit below what is charged)."""

    limit: str
    swap_limit: str | None
    events: str
    usage: str
    page_cache: bytes
    reclaim: str | None


V1 = _Layout("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control",
             "memory.usage_in_bytes", b"cache", None)
V2 = _Layout("memory.max", None, "memory.events", "memory.current", b"file", "memory.reclaim")
#: What a worker's memory cgroup may keep charged between programs, but the page cache (cheap
#: to reclaim, and shared by programs that read the same files) and the charge the kernel keeps
#: in stock for each CPU (up to 64 pages a CPU, which no exit gives back).
LEFTOVER_MB = 32
RECLAIM_ROUNDS = 3


def leftover_room() -> int:
    """The bytes a worker's memory cgroup may keep charged between programs, but the page
    cache: :data:`LEFTOVER_MB`, and the stock of 64 pages each CPU may hold."""
    return LEFTOVER_MB * 2**20 + (os.cpu_count() or 1) * 64 * resource.getpagesize()


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            kind, options = fields[dash + 1], fields[dash + 3]
            if kind in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], kind, options))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per hierarchy: {"memory": ..., "": ... (v2)}."""
    paths = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _inside(mount_root: str, mount_point: str, path: str) -> str:
    relative = os.path.relpath(path, mount_root)
    return os.path.normpath(os.path.join(mount_point, relative))


def parents() -> list[tuple[str, _Layout]]:
    """Where a memory cgroup could be made: below this process's own cgroup (never elsewhere,
    which would take programs out of the limits of the job or container around them). Under v2
    that works only where the cgroup was delegated without processes of its own in it."""
    own = _own_paths()
    found: list[tuple[str, _Layout]] = []
    for root, point, kind, options in _mounts():
        if kind == "cgroup" and "memory" in options.split(",") and "memory" in own:
            found.append((_inside(root, point, own["memory"]), V1))
        elif kind == "cgroup2" and "" in own:
            with contextlib.suppress(OSError), open(f"{point}/cgroup.controllers") as handle:
                if "memory" in handle.read().split():
                    found.append((_inside(root, point, own[""]), V2))
    return found


class MemoryCgroup:
    """One worker's memory cgroup. ``create`` raises OSError saying why none could be made."""

    def __init__(self, path: str, layout: _Layout):
        self.path, self.layout = path, layout
        self._limit_files = [layout.limit]
        if layout.swap_limit and os.path.exists(os.path.join(path, layout.swap_limit)):
            self._limit_files.append(layout.swap_limit)  # v1 wants memsw >= limit at every step
        self._limit_mb: int | None = None
        # Kept open: the fork server (or, without one, each program's child) joins by writing
        # "0" to ``procs`` (see launcher.py), and the counter is read with one pread once per
        # program. Closed on exec (the fork server gets ``procs`` as fd 4 on purpose), and in a
        # program's child before its code runs.
        self.procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        self._events = os.open(os.path.join(path, layout.events), os.O_RDONLY | os.O_CLOEXEC)
        self._usage = os.open(os.path.join(path, layout.usage), os.O_RDONLY | os.O_CLOEXEC)
        self._stat = os.open(os.path.join(path, "memory.stat"), os.O_RDONLY | os.O_CLOEXEC)
        self._page_cache = re.compile(rb"^" + layout.page_cache + rb" (\d+)$", re.MULTILINE)
        self._room = leftover_room()
        self._oom_seen = self.oom_kills()

    @classmethod
    def create(cls, name: str) -> MemoryCgroup:
        """Make (or take over: a worker that died leaves its cgroup to the next one with its uid)
        the cgroup ``name`` in the first place that allows it."""
        reasons = []
        for parent, layout in parents():
            try:
                if layout is V2:
                    _enable_memory(parent)
                path = os.path.join(parent, name)
                if not os.path.isdir(path):
                    os.mkdir(path, 0o755)
            except OSError as exc:
                reasons.append(f"{parent}: {exc.strerror or exc}")
                continue
            group = cls(path, layout)
            if layout is V2:  # (not memory.oom.group: an OOM kill would take the fork server)
                with contextlib.suppress(OSError):
                    group._write("memory.swap.max", "0")
            return group
        raise OSError("no memory cgroup could be made"
                      + (f" ({'; '.join(reasons)})" if reasons else
                         " (no cgroup hierarchy with the memory controller is mounted)"))

    def prepare(self, memory_mb: int) -> int:
        """Set the limit for the next program (when it changed); return the OOM-kill count to
        compare against (the count last read: nothing runs in the cgroup between programs)."""
        if memory_mb != self._limit_mb:
            self._set_limit(memory_mb)
            self._limit_mb = memory_mb
        return self._oom_seen

    def _set_limit(self, memory_mb: int) -> None:
        value = str(memory_mb * 2**20)
        try:
            for name in self._limit_files:
                self._write(name, value)
        except OSError:  # (v1: memory plus swap is never below memory, at every step)
            for name in reversed(self._limit_files):
                self._write(name, value)

    def reclaim_leftover(self) -> None:
        """Take back what the last program left charged here, once its processes are gone,
        beyond :func:`leftover_room` and the page cache: what the kernel keeps for it, such as
        the entries of its cache of names that a program looked up and found missing, which the
        next program would otherwise pay to reclaim within its own time limit (red team: a
        correct program near its memory and time limits timed out after one that had looked up
        1.7 million missing names, 500 MiB of the cgroup's 512). Raise OSError where it stays
        (under cgroup v2 before Linux 5.19, which has no ``memory.reclaim``, at once)."""
        if int(os.pread(self._usage, 64, 0)) <= self._room:  # (one read: the usual case)
            return
        kept = self._kept()
        for _ in range(RECLAIM_ROUNDS):  # (a round may take the page cache first)
            if kept <= self._room:
                return
            with contextlib.suppress(OSError):  # (less than asked for: as much as it could)
                if self.layout.reclaim is not None:
                    self._write(self.layout.reclaim, str(kept))
                else:  # v1: a limit below the charge reclaims down to it, then the limit again
                    self._set_limit(LEFTOVER_MB)
            if self.layout.reclaim is None and self._limit_mb is not None:
                self._set_limit(self._limit_mb)
            kept = self._kept()
        if kept > self._room:
            raise OSError(f"{kept >> 20} MiB that programs left charged to the worker's memory "
                          "cgroup cannot be reclaimed")

    def _kept(self) -> int:
        """What is charged here but the page cache."""
        usage = int(os.pread(self._usage, 64, 0))
        found = self._page_cache.search(os.pread(self._stat, 1 << 16, 0))
        return usage - (int(found.group(1)) if found else 0)

    def probes(self) -> tuple[int, int, int]:
        """What tells at once that a program left the cgroup as it found it: the descriptors of
        its ``memory.events`` (unchanged: no OOM kill) and of its usage, and the room
        :meth:`reclaim_leftover` leaves (a usage within it needs no reclaim)."""
        return self._events, self._usage, self._room

    def oom_kills(self) -> int:
        """The kernel's count of OOM kills in this cgroup, read now."""
        match = re.search(rb"^oom_kill (\d+)$", os.pread(self._events, 4096, 0), re.MULTILINE)
        self._oom_seen = int(match.group(1)) if match else 0
        return self._oom_seen

    def remove(self) -> None:
        for fd in (self.procs, self._events, self._usage, self._stat):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(self.path)

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as handle:
            handle.write(value)


def cgroup_name(uid: int | None, worker_pid: int) -> str:
    """The name of the memory cgroup of the worker that runs programs as ``uid``, or, where
    programs keep the caller's uid (``uid`` None), of the worker with host pid ``worker_pid``."""
    return f"hybridmetric-uid{uid}" if uid is not None else f"hybridmetric-pid{worker_pid}"


def remove_leftover(name: str, rounds: int = 500) -> None:
    """Remove the cgroup ``name`` where a worker killed before it could left it, once the
    processes killed with it are gone (``rounds`` of 10 ms at most; nothing where there is
    none)."""
    for parent, _ in parents():
        for _ in range(rounds):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError as exc:
                if exc.errno == errno.EBUSY:  # its programs are still dying
                    time.sleep(0.01)
                    continue
            break


def _enable_memory(parent: str) -> None:
    """cgroup v2 hands a controller to children only when the parent's subtree_control has it."""
    with open(os.path.join(parent, "cgroup.subtree_control")) as handle:
        if "memory" in handle.read().split():
            return
    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as handle:
        handle.write("+memory")
