"""Whether a program left anything, told in one call where it left nothing (the usual case).

After each program the worker sweeps what it may have left (``Worker.sweep``: processes,
sockets in flight, files in the private temporary folders, System V IPC objects and POSIX
message queues, OOM kills and memory charged to the cgroup). In Python that takes ~60 µs a
program, a seventh of the worker's time. :class:`CleanState` records what a sweep
left clean and compares it after the next program in one call of the fork loop
(``hm_clean_unchanged`` in ``_forkloop.c``): where everything is as recorded, the program left
nothing, and the worker skips the sweep; where anything differs, or cannot be read, it sweeps
in full, and records again.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from types import ModuleType

from hybridmetric.sandbox.launcher import FORK_LOOP, fork_loop

#: The sizes ``_forkloop.c`` gives ``struct hm_clean``'s probes (its ``CLEAN_*``, which
#: :class:`CleanState` checks against the fork loop's own).
READS, PATHS, PIDFDS, READ_BYTES, PATH_BYTES, SOCKETS_BYTES = 2, 8, 2, 1024, 256, 64


class _Clean(ctypes.Structure):
    """``struct hm_clean`` in ``_forkloop.c``."""

    _fields_ = [("reads", ctypes.c_int32), ("paths", ctypes.c_int32),
                ("read_fd", ctypes.c_int32 * READS), ("read_size", ctypes.c_int32 * READS),
                ("pidfd", ctypes.c_int32 * PIDFDS), ("usage_fd", ctypes.c_int32),
                ("sockets_fd", ctypes.c_int32), ("sockets_size", ctypes.c_int32),
                ("no_ipc", ctypes.c_int32), ("room", ctypes.c_int64),
                ("status", (ctypes.c_int64 * 5) * PATHS),
                ("read_bytes", (ctypes.c_char * READ_BYTES) * READS),
                ("sockets_line", ctypes.c_char * SOCKETS_BYTES),
                ("path", ctypes.c_char * (PATH_BYTES * PATHS))]


class CleanState:
    """What the worker's last full sweep left, and the one-call check that it is still so.

    ``reads``: descriptors of files whose whole content stays as recorded while nothing is left
    (the worker's list of children, its memory cgroup's ``memory.events``, v1:
    ``memory.oom_control``); ``paths``:
    directories whose inode, mode, size and times do (the private temporary folders and the
    message queues' folder, on file systems whose directory size counts entries:
    ``isolation.counted_dirs``); ``pidfds``: processes that must still run (the fork server);
    ``usage``: the cgroup's usage (``memory.current``; v1: ``memory.usage_in_bytes``), which may
    hold up to ``room`` bytes (page cache included: where a program's files stay cached past
    the room, as a C++ or Java worker's may, each program is swept in full); ``sockets``: the
    network namespace's socket count (``/proc/self/net/sockstat``), whose first line must read
    as before the program (:meth:`begin`); ``ipc``: no System V IPC object may be there.
    Descriptors, all of them, which the caller keeps open.
    """

    def __init__(self, reads: Sequence[int], paths: Sequence[str], pidfds: Sequence[int],
                 usage: int | None, room: int, sockets: int | None, ipc: bool):
        encoded = [path.encode() for path in paths]
        if (len(reads) > READS or len(paths) > PATHS or len(pidfds) > PIDFDS
                or any(len(path) >= PATH_BYTES for path in encoded)):
            raise ValueError("more to check than the fork loop's check holds")
        self._loop = _checked(fork_loop())
        self._state = _Clean(reads=len(reads), paths=len(paths),
                             usage_fd=-1 if usage is None else usage, room=room,
                             sockets_fd=-1 if sockets is None else sockets, no_ipc=ipc)
        self._state.read_fd[:len(reads)] = reads
        self._state.pidfd[:] = [*pidfds, *[-1] * PIDFDS][:PIDFDS]
        for i, path in enumerate(encoded):
            ctypes.memmove(ctypes.addressof(self._state) + _Clean.path.offset + i * PATH_BYTES,
                           path, len(path))
        self._at = ctypes.addressof(self._state)
        self.recorded = False

    def record(self) -> None:
        """Take what is there now as clean (a full sweep has just left it so)."""
        self.recorded = False
        self._loop.clean_record(self._at)
        self.recorded = True

    def forget(self) -> None:
        """Until the next :meth:`record`, nothing is taken as clean."""
        self.recorded = False

    def begin(self) -> None:
        """Before a program: read the socket count it must leave as it is."""
        self._loop.clean_begin(self._at)

    def sockets_before(self) -> int:
        """The socket count :meth:`begin` read (``sockets: used N``)."""
        if self._state.sockets_size < 0:
            raise OSError("the socket count could not be read")
        return int(self._state.sockets_line[:self._state.sockets_size].rsplit(b" ", 1)[1])

    def unchanged(self) -> bool:
        """Whether everything is as recorded, read now: then the program left nothing."""
        return self.recorded and self._loop.clean_unchanged(self._at)


def _checked(loop: ModuleType) -> ModuleType:
    """The fork loop, where its ``struct hm_clean`` is the one :class:`_Clean` mirrors; else
    ImportError: a loop built from an older ``_forkloop.c`` (an editable install not rebuilt)."""
    layout = (READS, PATHS, PIDFDS, READ_BYTES, PATH_BYTES, SOCKETS_BYTES, ctypes.sizeof(_Clean))
    names = ("CLEAN_READS", "CLEAN_PATHS", "CLEAN_PIDFDS", "CLEAN_BYTES", "CLEAN_PATH_BYTES",
             "SOCKETS_BYTES", "CLEAN_SIZE")
    if tuple(getattr(loop, name, None) for name in names) != layout:
        raise ImportError(f"the sandbox's fork loop ({FORK_LOOP}) was built from another "
                          "_forkloop.c than this one: install hybridmetric with pip again "
                          "(pip install -e . in a checkout) to rebuild it")
    return loop
