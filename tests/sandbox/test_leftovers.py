"""The one-call check that a program left nothing (``leftovers.CleanState``): each probe, changed
alone, makes it fail (and the worker sweep in full); nothing changed, it holds."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hybridmetric.sandbox import isolation
from hybridmetric.sandbox.launcher import fork_loop
from hybridmetric.sandbox.leftovers import PATH_BYTES, READ_BYTES, CleanState, _checked, _Clean


def rewrite(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


@pytest.fixture
def counting() -> Path:
    """A folder whose size counts its entries (tmpfs, as the worker's private folders are),
    so that an entry made and removed again tells, whatever the clock's resolution."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    top = Path(tempfile.mkdtemp(dir="/dev/shm"))
    if not isolation._size_counts_entries(str(top)):
        shutil.rmtree(top)
        pytest.skip("/dev/shm's folders do not count their entries here")
    yield top
    shutil.rmtree(top)


@pytest.fixture
def probes(tmp_path: Path, counting: Path):
    """Two folders, a file read whole, a usage file, a socket count file."""
    folders = [counting / "a", counting / "b"]
    for folder in folders:
        folder.mkdir()
    opened = []

    def file(name: str, data: bytes) -> int:
        fd = os.open(tmp_path / name, os.O_RDWR | os.O_CREAT)
        os.write(fd, data)
        opened.append(fd)
        return fd

    read = file("events", b"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    usage = file("usage", b"4096\n")
    sockets = file("sockstat", b"sockets: used 7\nTCP: inuse 0 orphan 0\n")
    yield folders, read, usage, sockets
    for fd in opened:
        os.close(fd)


def state(probes, pidfds=(), room=4096, ipc=False) -> CleanState:
    folders, read, usage, sockets = probes
    return CleanState([read], [str(f) for f in folders], list(pidfds), usage, room, sockets, ipc)


def test_nothing_changed_holds(probes) -> None:
    clean = state(probes)
    assert not clean.unchanged()  # nothing recorded yet
    clean.record()
    clean.begin()
    assert clean.unchanged()
    assert clean.unchanged()  # (reads nothing into its record)
    assert clean.sockets_before() == 7
    clean.forget()
    assert not clean.unchanged()


@pytest.mark.parametrize("change", ["entry", "entry_removed", "mode", "times", "replaced"])
def test_a_folder_changed_fails(probes, change: str) -> None:
    folders = probes[0]
    clean = state(probes)
    if change == "entry_removed":
        (folders[1] / "x").write_text("")
    clean.record()
    clean.begin()
    if change == "entry":
        (folders[1] / "left").write_text("")
    elif change == "entry_removed":
        (folders[1] / "x").unlink()
    elif change == "mode":
        folders[0].chmod(folders[0].stat().st_mode & 0o7777 ^ 0o010)
    elif change == "times":
        os.utime(folders[0], ns=(1, 1))
    else:
        folders[0].rename(folders[0].with_name("gone"))
        folders[0].mkdir()
    assert not clean.unchanged()


@pytest.mark.parametrize("data", [b"low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n",  # same size
                                  b"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\nmore 1\n",  # longer
                                  b"low 0\n"])  # shorter
def test_a_file_read_whole_changed_fails(probes, data: bytes) -> None:
    clean = state(probes)
    clean.record()
    clean.begin()
    rewrite(probes[1], data)
    assert not clean.unchanged()


def test_a_file_too_long_to_compare_never_holds(probes) -> None:
    rewrite(probes[1], b"x" * READ_BYTES)
    clean = state(probes)
    clean.record()
    clean.begin()
    assert not clean.unchanged()


@pytest.mark.parametrize(("usage", "held"), [(b"4096\n", True), (b"4097\n", False),
                                             (b"0\n", True), (b"", False), (b"max\n", False)])
def test_usage_within_its_room(probes, usage: bytes, held: bool) -> None:
    clean = state(probes)
    clean.record()
    clean.begin()
    rewrite(probes[2], usage)
    assert clean.unchanged() is held


def test_the_socket_count_as_before_the_program(probes) -> None:
    sockets = probes[3]
    clean = state(probes)
    clean.record()
    rewrite(sockets, b"sockets: used 9\nTCP: inuse 0 orphan 0\n")
    clean.begin()  # (what the program found: the count before it, not at the record)
    assert clean.unchanged()
    assert clean.sockets_before() == 9
    rewrite(sockets, b"sockets: used 8\nTCP: inuse 0 orphan 0\n")  # (as long)
    assert not clean.unchanged()
    rewrite(sockets, b"sockets: used 10\nTCP: inuse 0 orphan 0\n")
    assert not clean.unchanged()
    rewrite(sockets, b"no line end")
    clean.begin()
    with pytest.raises(OSError):
        clean.sockets_before()
    assert not clean.unchanged()


def test_a_process_that_must_run_ended(probes) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    pidfd = os.pidfd_open(child.pid)
    try:
        clean = state(probes, pidfds=[pidfd])
        clean.record()
        clean.begin()
        assert clean.unchanged()
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert not clean.unchanged()
    finally:
        os.close(pidfd)


def test_a_real_list_of_children(probes) -> None:
    """This process's own list of children (what the worker reads): a child made and reaped
    leaves it as it was; a child alive changes it."""
    clean = CleanState([isolation.own_children()], [], [], None, 0, None, False)
    clean.record()
    subprocess.run([sys.executable, "-c", ""], check=True)
    assert clean.unchanged()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not clean.unchanged()
    finally:
        child.kill()
        child.wait()
    assert clean.unchanged()


IPC = """
import ctypes, os, sys
sys.path[:0] = {path!r}
from hybridmetric.sandbox.leftovers import CleanState
libc = ctypes.CDLL(None, use_errno=True)
# CLONE_NEWIPC, as root; else within a user namespace of its own (CLONE_NEWUSER)
if libc.unshare(0x08000000) != 0 and libc.unshare(0x10000000 | 0x08000000) != 0:
    sys.exit(3)
clean = CleanState([], [], [], None, 0, None, True)
clean.record()
assert clean.unchanged()
kind = sys.argv[1]
if kind == "shm":
    made = libc.shmget(0, 4096, 0o1600)
elif kind == "sem":
    made = libc.semget(0, 1, 0o1600)
else:
    made = libc.msgget(0, 0o1600)
assert made >= 0, ctypes.get_errno()
assert not clean.unchanged()
"""


@pytest.mark.parametrize("kind", ["shm", "sem", "msg"])
def test_a_system_v_object_fails(kind: str) -> None:
    """In an IPC namespace of its own (nothing of the host's there): one object of each kind."""
    done = subprocess.run([sys.executable, "-c", IPC.format(path=sys.path), kind],
                          capture_output=True, text=True, check=False)
    if done.returncode == 3:
        pytest.skip("no IPC namespace of its own may be made here")
    assert done.returncode == 0, done.stderr


def test_what_it_cannot_hold_is_refused(probes) -> None:
    with pytest.raises(ValueError, match="holds"):
        CleanState([probes[1]] * 3, [], [], None, 0, None, False)
    with pytest.raises(ValueError, match="holds"):
        CleanState([], ["/" + "x" * PATH_BYTES], [], None, 0, None, False)
    gone = CleanState([], ["/no/such/folder"], [], None, 0, None, False)
    with pytest.raises(FileNotFoundError):
        gone.record()
    assert not gone.unchanged()


def test_the_record_is_laid_out_as_the_fork_loop_s() -> None:
    """The ctypes mirror and ``struct hm_clean`` agree (size and probe counts); a fork loop
    built from another ``_forkloop.c`` is refused with how to rebuild it."""
    loop = fork_loop()
    assert ctypes.sizeof(_Clean) == loop.CLEAN_SIZE
    assert _checked(loop) is loop

    class Stale:  # (a loop built before the check existed has none of its constants)
        pass

    with pytest.raises(ImportError, match="rebuild"):
        _checked(Stale())  # type: ignore[arg-type]
