"""Linux isolation primitives, applied once per worker and once per program.

Per worker (a long-lived process that owns one sandbox uid):

- no new privileges (``PR_SET_NO_NEW_PRIVS``): no program gains any through exec (set-user-ID
  programs, file capabilities);
- a network namespace of its own (``unshare(CLONE_NEWNET)``; without root, inside a user
  namespace that maps only the user's own uid): only a loopback that is down, so nothing,
  including a listener on the host's 127.0.0.1 or an abstract Unix socket, can be reached;
- a seccomp filter that refuses every socket family but ``AF_UNIX`` (the fallback where namespaces
  are not allowed, and a second wall where they are), the kernel keyring calls (a uid's
  keyring outlives its processes: one program could leave data there for the next), new
  user namespaces (where a program would hold every capability) and more (:func:`load_filter`);
- a mount namespace with private tmpfs mounts on ``/tmp``, ``/var/tmp``, ``/dev/shm`` (the
  world-writable places) and ``/run`` (where the host's Unix sockets live: a socket file can be
  connected to on a read-only mount, and seccomp lets AF_UNIX through; one elsewhere stays in
  reach of a program whose uid may write it), emptied after every program; without root
  (programs then run as the user), every other mount is made read-only; with root or without,
  the host's own top-level folders (``/home``, ``/root``, ``/var``, a data folder) and the
  user's home are covered, but for the paths programs run on, so that programs can neither
  change the user's files nor read them, and ``/dev`` is a read-only one of its own, with the
  few devices any process may use (:func:`private_devices`: no terminal or other device of the
  host's); as root, every mount ``noatime`` (:func:`no_access_times`);
- a PID namespace whose init is the worker, with its own ``/proc``: programs see and can signal
  only the worker's processes, and signals they send the worker are dropped by the kernel
  (without root, programs share the worker's uid and run in one more, nested, whose init is the
  fork server: see :func:`children_in_a_new_pid_namespace`);
- an IPC namespace: no System V shared memory, semaphore or message queue, nor POSIX message
  queue, of the host's is in reach, and those a program makes are removed after it (System V
  shared memory capped at :data:`SHARED_MEMORY_MB` in all, where the worker may set that);
- it is a child subreaper, so a process that escapes its group is re-parented to it and found.

Per program: its own session and process group, rlimits, a private working directory, stdin from
``/dev/null``, and, when running as root, a drop to the worker's unprivileged uid. After each
program every process of that uid is killed (``kill(-1, SIGKILL)`` run as the uid), which also
catches grandchildren that called ``setsid`` to leave the group.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import select
import shutil
import signal
import socket
import stat
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hybridmetric.sandbox.launcher import PR_SET_PDEATHSIG, KillRounds, drop_privileges
from hybridmetric.sandbox.launcher import check as _check
from hybridmetric.sandbox.launcher import libc as _libc

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
IPC_RMID = 0
MSG_INFO = 12
SHM_INFO = 14
SEM_INFO = 19
MS_NOEXEC = 0x8
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
MS_REC = 0x4000
MS_BIND = 0x1000
MS_REMOUNT = 0x20
MS_RDONLY = 0x1
MS_PRIVATE = 1 << 18
MS_NOSUID = 0x2
MS_NODEV = 0x4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
AF_UNIX = 1
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = 0x00050000  # | the errno
SCMP_CMP_NE = 1
SCMP_CMP_MASKED_EQ = 7  # (argument & datum_a) == datum_b
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")
#: The files and folders each private directory holds at most: its size counts bytes alone, and
#: each empty file takes ~1 KiB of the kernel's memory, which without root no limit counts (a
#: program pinned 500 MiB in 5 s making them, red team).
PRIVATE_FILES = 65536
#: Where a worker mounts its IPC namespace's POSIX message queues (a private directory).
MQUEUE_DIR = "/tmp/.mqueue"
#: libseccomp by its soname, which is what ``ctypes.util.find_library`` would return; the worker
#: does not import ctypes.util, which would bring subprocess and threading into it (it forks
#: programs itself without root).
SECCOMP_LIBRARY = "libseccomp.so.2"
SYS_MOUNT_SETATTR = 442  # one number on every architecture (Linux 5.12)
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOATIME = 0x10
MOUNT_ATTR__ATIME = 0x70  # (the access-time setting's bits, cleared to set another)
AT_RECURSIVE = 0x8000
AT_FDCWD = -100


@dataclass(frozen=True)
class Isolation:
    """Which mechanisms a worker got; the host refuses to run without a network block."""

    network_namespace: bool
    seccomp: bool
    mount_namespace: bool
    uid: int | None  # the unprivileged uid programs run as, or None when not root
    memory_cgroup: bool = False  # one memory limit for a program's whole process tree
    pid_namespace: bool = False  # programs see and signal only the worker's own processes
    read_only: bool = False  # without root: files read-only but the private dirs, host's hidden
    ipc_namespace: bool = False  # System V IPC, POSIX queues: none of the host's; SysV not kept
    message_queues: bool = False  # POSIX message queues cleared after each program
    no_keyrings: bool = False  # seccomp denies the kernel keyring calls (they outlive programs)
    no_user_namespaces: bool = False  # seccomp denies new user namespaces

    @property
    def network_blocked(self) -> bool:
        return self.network_namespace or self.seccomp

    @property
    def walls(self) -> str:
        """The walls that are up, e.g.
        ``netns+seccomp+mountns+uid+memcg+pidns+ipcns+nokeys+nouserns``."""
        named = (("netns", self.network_namespace), ("seccomp", self.seccomp),
                 ("mountns", self.mount_namespace), ("uid", self.uid is not None),
                 ("memcg", self.memory_cgroup), ("pidns", self.pid_namespace),
                 ("rofs", self.read_only), ("ipcns", self.ipc_namespace),
                 ("nokeys", self.no_keyrings), ("nouserns", self.no_user_namespaces))
        return "+".join(name for name, on in named if on) or "none"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def _blocker(path: str) -> tuple[str, str] | None:
    """The first directory on the way to ``path`` that others may not enter, and the entry
    below it that leads to ``path``; None when others can reach ``path``."""
    current = "/"
    for part in Path(path).parts[1:]:
        if not os.stat(current).st_mode & 0o001:
            return current, os.path.join(current, part)
        current = os.path.join(current, part)
    return None


def is_within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both real, absolute paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _mount_tmpfs(path: str, options: bytes) -> None:
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
           f"mount tmpfs on {path}")


#: Entries of the private directories bind-mounted back because needed paths lie below them
#: (e.g. a virtual environment under /tmp); :func:`empty_private_dirs` never touches them.
PRESERVED: set[str] = set()
#: The private directories as covered: real paths, each once, parents first.
COVERED: list[str] = []


def _cover(directory: str, options: bytes, entries: set[str]) -> None:
    """Mount an empty tmpfs over ``directory`` and bind-mount ``entries`` (paths below it, none
    inside another) back, each at its own place."""
    handles = {entry: os.open(entry, os.O_PATH) for entry in sorted(entries)}
    try:
        _mount_tmpfs(directory, options)
        for entry, handle in handles.items():
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            if os.path.isdir(f"/proc/self/fd/{handle}"):
                os.mkdir(entry)
            else:
                open(entry, "x").close()
            _check(_libc.mount(f"/proc/self/fd/{handle}".encode(), entry.encode(), None,
                               MS_BIND | MS_REC, None), f"bind-mount {entry}")
    finally:
        for handle in handles.values():
            os.close(handle)


def _entries_below(directory: str, paths: list[str]) -> set[str]:
    """The children of ``directory`` that lead to any of ``paths``."""
    entries = set()
    for path in paths:
        relative = os.path.relpath(path, directory)
        if relative == "." or relative.startswith(".."):
            continue
        entries.add(os.path.join(directory, Path(relative).parts[0]))
    return entries


#: The top-level folders of a Linux system's own (programs, libraries, settings, devices); every
#: other one (``/home``, ``/root``, ``/srv``, ``/mnt``, a ``/data`` or ``/work`` of the host's)
#: is hidden from programs, with root or without (see :func:`private_mounts`,
#: :func:`read_only_files`); ``/var`` too, the host's variable data, where its services keep
#: their databases and the socket files anyone may connect to (a MySQL's, a Postfix's), which a
#: read-only mount does not close (but ``/var/tmp``, private).
SYSTEM_DIRS = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "opt",
                         "dev", "proc", "sys", "run", "tmp", "nix", "gnu", "snap"})


def private_mounts(needed: list[str]) -> None:
    """A mount namespace whose world-writable directories are fresh tmpfs mounts, and in which
    the host's own folders are hidden.

    ``needed`` are paths programs must read (the Python installation, compilers). Those that lie
    inside a private directory (a virtual environment under ``/tmp``) are bind-mounted back into
    its fresh tmpfs. Every top-level folder but the system's (:data:`SYSTEM_DIRS`) is covered by
    an empty read-only tmpfs into which only the needed paths below it are bind-mounted, so that
    a program reads neither the host's data (a benchmark's solutions, other users' files) nor
    anything of the sandbox's but what it runs on. A directory on the way to a needed path that
    others may not enter (``/root`` holding a pyenv Python) is covered as well, with only the
    needed entries bound back: the uid reaches the interpreter and nothing else of it.
    """
    _check_private_dirs(needed)
    new_mount_namespace()
    private_devices()
    _private_dirs(needed)
    _hide_host_dirs(needed)
    blocked: dict[str, set[str]] = {}
    for path in needed:
        found = _blocker(path)
        if found is not None:
            blocked.setdefault(found[0], set()).add(found[1])
    for directory, entries in blocked.items():
        _cover(directory, b"mode=0755,size=1m", entries)
    still = [path for path in needed if _blocker(path) is not None]
    if still:
        raise OSError(errno.EACCES, f"the sandbox uid cannot reach {still}")


#: The host's device files that programs get: those any process may open, which reach nothing
#: of the host's but its random numbers (``tty``: the controlling terminal, which no program has).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
#: The links of a ``/dev`` (``ptmx``: to the private pseudo-terminals' multiplexer).
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
#: The terminals a worker's programs may hold at once: every instance of the pseudo-terminal file
#: system but the host's own shares the kernel's 3072, which one program without a ``max`` took,
#: so that no program of another worker, and no container on the host, could make one (red team).
TERMINALS = 64


def private_devices() -> None:
    """A ``/dev`` of the mount namespace's own, read-only: :data:`DEVICES` bound from the
    host's, :data:`DEVICE_LINKS`, a pseudo-terminal file system of its own on ``pts``
    (programs can make terminals, ``os.openpty``, but not open the host's) and the host's
    ``shm``, which :func:`_private_dirs` covers next (with what programs need there bound back,
    as for ``/tmp``: see :data:`PRIVATE_DIRS`). The host's other devices are out of reach:
    without root, programs run as the user, and a read-only mount does not stop them opening a
    device the user may open (a terminal the user logged in on, or one a group or an ACL gives
    the user: they read what the user typed there, or typed into it, red team), nor the host's
    POSIX message queues that systemd mounts on ``/dev/mqueue``; with root or without, the
    kernel's log (``/dev/kmsg``, readable by anyone on many hosts) and the system log's socket
    (``/dev/log``, which anyone may write to)."""
    _cover("/dev", b"mode=0755,size=64k", {f"/dev/{name}" for name in (*DEVICES, "shm")
                                            if os.path.exists(f"/dev/{name}")})
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/pts", 0o755)
    _check(_libc.mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                       f"newinstance,ptmxmode=0666,mode=0620,max={TERMINALS}".encode()),
           "mount devpts on /dev/pts")
    _read_only("/dev", recursive=False)


def _hide_host_dirs(needed: list[str]) -> list[str]:
    """Cover each top-level folder that is not the system's (and is no needed path itself) with
    an empty read-only tmpfs, the needed paths below it bound back (see :func:`private_mounts`),
    and the private directories made there already (:data:`COVERED`: ``/var/tmp``), and each
    other top-level entry but a link (a host's ``/.env``, a container's descriptor) with an
    empty read-only file; return the folders covered. (What is made at the top level after the
    worker started stays in view.)"""
    paths = needed + [os.path.realpath(n) for n in needed]
    hidden, files = [], []
    for name in sorted(os.listdir("/")):
        top = os.path.join("/", name)
        if name in SYSTEM_DIRS or top in paths:
            continue
        try:
            mode = os.lstat(top).st_mode
        except OSError:  # gone, or a mount that no longer answers (stale NFS, dead FUSE)
            continue
        if stat.S_ISLNK(mode):
            continue
        if not stat.S_ISDIR(mode):
            files.append(top)
            continue
        _cover(top, b"mode=0755,size=1m", _paths_below(top, paths + COVERED))
        _read_only(top, recursive=False)
        hidden.append(top)
    if files:
        _empty_files(files)
    return hidden


def _empty_files(paths: list[str]) -> None:
    """Bind an empty read-only file over each of ``paths`` (after :func:`_private_dirs`: the
    file is made in a private directory, the source of a bind mount having to be in this
    namespace, and unlinked once bound: a program that shares the worker's uid cannot write it
    there). An empty file already bound there and unlinked, as here (a sandbox started within
    another's mounts), on which nothing can be mounted, stays as it is."""
    if not COVERED:
        raise OSError(errno.ENOENT, "no private directory to make an empty file in, to cover "
                                    f"the host's {', '.join(paths)}")
    empty = os.path.join(COVERED[0], "hybridmetric-empty")
    os.close(os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))
    try:
        for path in paths:
            if _libc.mount(os.fsencode(empty), os.fsencode(path), None, MS_BIND, None) != 0:
                number = ctypes.get_errno()
                with contextlib.suppress(OSError):
                    found = os.lstat(path)
                    if number == errno.ENOENT and found.st_nlink == 0 and found.st_size == 0:
                        continue
                raise OSError(number, f"bind-mount an empty file on {path}: "
                                      f"{os.strerror(number)}")
            _read_only(path, recursive=False)
    finally:
        os.unlink(empty)


def name_the_uid(uid: int) -> None:
    """Give the programs' uid a name in this mount namespace (after :func:`private_mounts`):
    ``/etc/passwd`` and ``/etc/group`` with an entry for it (home ``/nonexistent``),
    bind-mounted read-only over the host's, so that ``getpass.getuser()``, ``pwd.getpwuid`` or
    node's ``os.userInfo()`` find it as they find the user a program normally runs as. (Each
    copy is made in the private ``/run``, the source of a bind mount having to be in this
    namespace, and unlinked once mounted.)"""
    for path, entry in (("/etc/passwd", f"sandbox:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin"),
                        ("/etc/group", f"sandbox:x:{uid}:")):
        with open(path, "rb") as handle:
            text = handle.read()
        if any(line.split(b":")[2:3] == [str(uid).encode()] for line in text.splitlines()):
            continue  # the machine names it already
        copy = f"/run/hybridmetric-{os.path.basename(path)}"
        named = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.write(named, text.rstrip(b"\n") + b"\n" + entry.encode() + b"\n")
        finally:
            os.close(named)
        try:
            _check(_libc.mount(copy.encode(), path.encode(), None, MS_BIND, None),
                   f"bind-mount {path}")
            _check(_libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None),
                   f"remount {path} read-only")
        finally:
            os.unlink(copy)


def pin(path: str, read_only: bool = False) -> None:
    """Make ``path`` a mount point of its own (a bind mount onto itself), read-only if asked:
    in a mount namespace whose programs hold no capability, they can then neither rename it
    (nor so move what is below it) nor, read-only, change what it holds, even where they own
    it (without root, programs run as the user that owns the worker's folder)."""
    _check(_libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind-mount {path}")
    if read_only:
        _check(_libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None),
               f"remount {path} read-only")


def hide_files(paths: Sequence[str]) -> None:
    """Mount ``/dev/null`` over each of ``paths`` (in this process's own mount namespace): a
    program that opens one reads nothing, and a library there no longer loads."""
    for path in paths:
        _check(_libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None),
               f"bind-mount /dev/null over {path}")


def new_mount_namespace() -> None:
    """A mount namespace of this process's own whose mounts do not reach the host's."""
    unshare(CLONE_NEWNS)
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def _check_private_dirs(needed: list[str]) -> None:
    """Raise when a private directory cannot be covered: a needed path is that directory."""
    for path in PRIVATE_DIRS:
        if any(os.path.realpath(n) == os.path.realpath(path) for n in needed):
            raise OSError(errno.EINVAL, f"a needed path is the private directory {path}")


def _private_dirs(needed: list[str]) -> None:
    """Cover each private directory with a fresh tmpfs; needed paths below it are bound back
    (:func:`_check_private_dirs` first)."""
    # real paths, parents first: one inside another is made again in the tmpfs covering it
    for path in sorted({os.path.realpath(p) for p in PRIVATE_DIRS if os.path.isdir(p)}):
        os.makedirs(path, exist_ok=True)  # a child of a directory covered just before
        keep = _entries_below(path, needed)
        _cover(path, b"mode=1777,size=1g,nr_inodes=" + str(PRIVATE_FILES).encode(), keep)
        PRESERVED.update(keep)
        COVERED.append(path)
        _remember_as_mounted(path)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _read_only(path: str, recursive: bool) -> None:
    """Make the mount at ``path`` (and, when ``recursive``, every mount below) read-only."""
    _set_mount_attributes(path, recursive, MOUNT_ATTR_RDONLY, 0, "ro")


def no_access_times() -> None:
    """Reading a file through this mount namespace changes no access time (``noatime`` on every
    mount): a program could otherwise mark files the next program reads the times of (and the
    host sees), one bit a file a day under ``relatime``."""
    _set_mount_attributes("/", True, MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME, "noatime")


def _set_mount_attributes(path: str, recursive: bool, set_: int, clear: int, what: str) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    _check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                         ctypes.c_uint(flags), ctypes.byref(attr),
                         ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr({path}, {what})")


#: The kernel's and the sandbox's own folders, which no home of the user's is hidden in.
KERNEL_DIRS = ("/dev", "/proc", "/sys", "/run")


def homes_to_hide(homes: Sequence[str], needed: Sequence[str]) -> list[str]:
    """Those of the user's ``homes`` that exist, as real paths, outer before inner, but for "/"
    (nothing to hide) and one that lies in a private directory (covered with it), in the
    kernel's folders (a system account's: ``/dev``) or in a ``needed`` path (real: the Python
    lives there, ``--prefix=$HOME``, or the tools do, ``/usr/sbin``), which stays shown,
    read-only, as it must be."""
    real = {os.path.realpath(home) for home in homes if os.path.isdir(home)}
    return sorted(home for home in real if home != "/" and not any(
        is_within(home, p) for p in (*PRIVATE_DIRS, *KERNEL_DIRS, *needed) if p != "/"))


def read_only_files(needed: list[str], homes: Sequence[str]) -> None:
    """Without root, in the worker's own user and mount namespaces: every mount read-only, fresh
    writable tmpfs mounts on the private directories, and the host's own folders hidden as
    root hides them (:func:`_hide_host_dirs`), each of the user's ``homes`` too wherever it is
    (``$HOME`` and the account's, which a caller's ``HOME`` need not name: CI, cron): each
    covered by an empty read-only tmpfs into which only the needed paths themselves (a virtual
    environment, the import path) are bound back, read-only. Programs run as the user: this
    keeps them from changing any of the user's files, and from reading the rest of them (keys,
    tokens, a benchmark's solutions). A home that is itself a needed path (a Python installed
    with ``--prefix=$HOME``) stays in view, read-only. The host's devices are out of reach
    (:func:`private_devices`)."""
    real = [os.path.realpath(n) for n in needed]
    hide = homes_to_hide(homes, real)
    _check_private_dirs(needed)
    _read_only("/", recursive=True)  # the first change: until here, a failure changed nothing
    try:
        private_devices()
        _private_dirs(needed)
        hidden = _hide_host_dirs(needed)
        covered: list[str] = []
        for home in hide:  # (a home under /opt, /usr, ...: under no hidden folder)
            if not any(is_within(home, top) for top in [*hidden, *covered]):
                _cover(home, b"mode=0755,size=1m", _paths_below(home, needed + real))
                _read_only(home, recursive=False)
                covered.append(home)
    except OSError as exc:
        raise RuntimeError(f"the sandbox's file system is half built ({exc}); "
                           "no program can run in it") from exc


def _paths_below(directory: str, paths: list[str]) -> set[str]:
    """Those of ``paths`` below ``directory`` that lie inside no other of them."""
    below = sorted({os.path.normpath(p) for p in paths
                    if os.path.normpath(p).startswith(directory + os.sep)})
    kept: list[str] = []
    for path in below:
        if not any(path.startswith(outer + os.sep) for outer in kept):
            kept.append(path)
    return set(kept)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


#: System calls of the kernel's key store, which keeps what a uid puts there after its processes
#: end (the user keyring): one program could leave data there for the next.
KEYRING_CALLS = (b"add_key", b"request_key", b"keyctl")
#: io_uring runs system calls (``IORING_OP_SOCKET``, ``IORING_OP_CONNECT``, ...) where seccomp
#: never sees them: it would take programs round the socket rule. They fail with ENOSYS, as on a
#: kernel without it (node's libuv and other users then fall back to plain system calls).
IO_URING_CALLS = (b"io_uring_setup", b"io_uring_enter", b"io_uring_register")
#: Linux's native asynchronous I/O (``io_setup``: the calls that use its contexts need one),
#: whose contexts count against one limit of the whole machine's (``fs.aio-max-nr``): a program
#: that took them all made ``io_setup`` fail for every process on the machine, root's and the
#: other workers' programs' among them, for as long as it ran (red team). It fails with ENOSYS, as
#: on a kernel without it (POSIX ``aio_read`` and its kin, in the C library, use threads).
AIO_CALLS = (b"io_setup",)
#: Huge pages come from one pool of the whole machine's (``vm.nr_hugepages``), which no limit of
#: a program's counts (nor a memory cgroup of version 1): a program that mapped the pool's pages
#: (``mmap`` with MAP_HUGETLB) made root's and every other process's fail, where a host keeps a
#: pool (a database's, red team). The calls that take them, ``mmap`` (MAP_HUGETLB), ``shmget``
#: (SHM_HUGETLB) and ``memfd_create`` (MFD_HUGETLB), fail with ENOSYS, as on a kernel without
#: huge pages (CONFIG_HUGETLBFS); the private ``/dev`` holds no hugetlbfs mount.
HUGE_PAGE_CALLS = ((b"mmap", 3, 0x40000), (b"shmget", 2, 0o4000),  # (x86-64's, arm64's)
                   (b"memfd_create", 1, 4))
#: Kernel facilities no generated program needs and kernel exploits lean on (loading BPF
#: programs, performance counters, user-space page-fault handling, which holds a kernel thread
#: still at a chosen moment): they fail with ENOSYS, as on a kernel built without them, whatever
#: the host's sysctls allow (``kernel.unprivileged_bpf_disabled``, ``perf_event_paranoid``,
#: ``vm.unprivileged_userfaultfd``; ``/dev/userfaultfd`` is root's).
KERNEL_SURFACE_CALLS = (b"bpf", b"perf_event_open", b"userfaultfd")
#: The calls that make a user namespace, in which a program would hold every capability (mount,
#: build namespaces of any kind, reach kernel code that needs them): ``clone`` and ``unshare``
#: with CLONE_NEWUSER fail (EPERM); ``clone3``, whose flags seccomp cannot read (they are in
#: memory), fails with ENOSYS, as on a kernel before 5.3 (the C library then makes threads and
#: processes with ``clone``). As Docker's default profile does.
USER_NAMESPACE_CALLS = (b"clone", b"unshare")
#: The calls that set a file's extended attributes, POSIX ACLs among them (``setxattrat``, Linux
#: 6.13, by its number where libseccomp does not know it: 463 on every architecture): a program
#: that owns a private directory (without root, it owns them all) would leave there what the next
#: one reads, or a default ACL that every later folder made in it inherits, shutting programs out
#: of their own folders. They fail with ENOTSUP, as on a file system without them (copies that
#: keep attributes, ``shutil.copy2``, go on without them).
XATTR_CALLS: tuple[bytes | int, ...] = (b"setxattr", b"lsetxattr", b"fsetxattr", 463)
#: ``ioctl`` requests that set a file's inode flags (``chattr``: no-dump, no-atime, ...), read
#: back by the next program as the extended attributes would be; they fail with ENOTTY, as on a
#: file system without flags, and ``file_setattr`` (Linux 6.17: 469) with ENOSYS.
FLAG_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)  # FS_IOC_SETFLAGS (and 32-bit), FSSETXATTR
FILE_SETATTR = 469
#: ``fcntl``'s request for a lease, whose holder makes every other ``open`` of the file wait up to
#: ``fs.lease-break-time`` (45 s): without root, programs own the user's files (read-only to them),
#: so one held a lease on a module of the user's venv, and the user's processes and the other
#: workers' programs that opened it waited (red team). It fails with EINVAL, as where leases are
#: off (``fs.leases-enable = 0``).
F_SETLEASE = 1024


def load_filter(deny_sockets: bool) -> None:
    """Load a seccomp filter (libseccomp) that makes the keyring calls fail (EPERM), io_uring,
    native AIO, huge pages (:data:`HUGE_PAGE_CALLS`) and :data:`KERNEL_SURFACE_CALLS` (ENOSYS),
    leases (:data:`F_SETLEASE`), the making of user namespaces (:data:`USER_NAMESPACE_CALLS`),
    the setting of extended attributes and inode flags (:data:`XATTR_CALLS`,
    :data:`FLAG_IOCTLS`) and, with ``deny_sockets``, ``socket()`` unless it is AF_UNIX
    (EACCES). Loaded by the worker once it has made its own namespaces (without root, its user
    namespace comes first)."""
    low_32_bits = 0xFFFF_FFFF  # (an ioctl's request is an int: the kernel reads no more)
    rules: list[tuple[bytes | int, int, _ArgCmp | None]] = [
        *((name, errno.EPERM, None) for name in KEYRING_CALLS),
        *((name, errno.ENOSYS, None)
          for name in (*IO_URING_CALLS, *AIO_CALLS, *KERNEL_SURFACE_CALLS)),
        *((name, errno.EPERM, _ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
          for name in USER_NAMESPACE_CALLS),
        (b"clone3", errno.ENOSYS, None),
        *((name, errno.ENOSYS, _ArgCmp(arg, SCMP_CMP_MASKED_EQ, flag, flag))
          for name, arg, flag in HUGE_PAGE_CALLS),
        *((name, errno.ENOTSUP, None) for name in XATTR_CALLS),
        *((b"ioctl", errno.ENOTTY, _ArgCmp(1, SCMP_CMP_MASKED_EQ, low_32_bits, request))
          for request in FLAG_IOCTLS),
        (FILE_SETATTR, errno.ENOSYS, None),
        (b"fcntl", errno.EINVAL, _ArgCmp(1, SCMP_CMP_MASKED_EQ, low_32_bits, F_SETLEASE))]
    if deny_sockets:
        rules.append((b"socket", errno.EACCES, _ArgCmp(0, SCMP_CMP_NE, AF_UNIX, 0)))
    _load_rules(rules)


def _load_rules(rules: list[tuple[bytes | int, int, _ArgCmp | None]]) -> None:
    """Load a seccomp filter that makes each call named (or numbered: one newer than
    libseccomp) fail with its errno (when its argument comparison, if any, holds); it adds to
    the filters already loaded."""
    with _filter(rules) as (lib, ctx):
        if lib.seccomp_load(ctx) != 0:  # (after NO_NEW_PRIVS: see isolate_worker)
            raise OSError(errno.EPERM, "seccomp_load failed")


def memory_file_filter() -> bytes:
    """A seccomp filter, as the kernel takes it (classic BPF, ``struct sock_filter``), that
    makes ``memfd_create`` and ``memfd_secret`` fail with ENOSYS, as on a kernel without them:
    for the programs of a worker without a memory cgroup, where a memory file's pages, written
    and not mapped, count to no limit of theirs (RLIMIT_DATA and RLIMIT_AS count what a process
    maps; a secret one's are locked in memory too: a program held 1.5 GiB of them with a limit
    of 256 MiB, red team). Each child
    loads it (``prepare_child`` in ``_forkloop.c``): the forking process makes the programs'
    output files with it."""
    with _filter([(name, errno.ENOSYS, None) for name in (b"memfd_create", b"memfd_secret")]
                 ) as (lib, ctx):
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        read, write = os.pipe()
        try:
            exported = lib.seccomp_export_bpf(ctx, write)
            os.close(write)
            write = -1
            program = os.read(read, 65536)  # (a few instructions, 8 bytes each)
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
        if exported != 0 or not program or len(program) % 8:
            raise OSError(errno.EINVAL, "seccomp_export_bpf failed")
        return program


@contextlib.contextmanager
def _filter(rules: list[tuple[bytes | int, int, _ArgCmp | None]]) -> Iterator[tuple[Any, int]]:
    """libseccomp and a filter context holding ``rules`` (see :func:`_load_rules`)."""
    try:
        lib = ctypes.CDLL(SECCOMP_LIBRARY, use_errno=True)
    except OSError as exc:
        raise OSError(errno.ENOENT, "libseccomp is not installed (apt-get install libseccomp2): "
                      f"{exc}") from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError(errno.EINVAL, "seccomp_init failed")
    try:
        for name, code, comparison in rules:
            number = name if isinstance(name, int) else lib.seccomp_syscall_resolve_name(name)
            if number < 0 or lib.seccomp_rule_add_array(
                    ctx, SCMP_ACT_ERRNO | code, number, int(comparison is not None),
                    None if comparison is None else ctypes.byref(comparison)) != 0:
                raise OSError(errno.EINVAL, f"seccomp_rule_add_array({name!r}) failed"
                              " (libseccomp 2.5 or later knows every call it is given by name)")
        yield lib, ctx
    finally:
        lib.seccomp_release(ctx)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def user_namespace(network: bool) -> None:
    """Without root: a user namespace (mapping only this uid and gid onto themselves), which
    grants what the worker's other walls need, and, with ``network``, owns a new network
    namespace. The capabilities it grants are dropped once the worker is set up
    (:func:`drop_capabilities`)."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | (CLONE_NEWNET if network else 0))
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


#: Without root, the limits of the worker's user namespace on what the kernel counts per user
#: across every user namespace (the inotify and fanotify ones; each with the user's own limit):
#: programs run as the user, and one that took all the user may have (128 inotify instances)
#: would leave none to the user's own processes (an editor's or a build's file watching).
USER_COUNTS = {"max_inotify_instances": "fs/inotify/max_user_instances",
               "max_inotify_watches": "fs/inotify/max_user_watches",
               "max_fanotify_groups": "fs/fanotify/max_user_groups",
               "max_fanotify_marks": "fs/fanotify/max_user_marks"}
#: The part of each user limit that the programs of all the sandbox's workers may hold together
#: (each worker's programs hold their share of it).
USER_COUNT_SHARE = 4
#: The kernel's bookkeeping for each message a POSIX message queue may hold, counted with its
#: bytes against ``RLIMIT_MSGQUEUE``.
MESSAGE_OVERHEAD = 128
#: The fewest queued signals a process may hold by POSIX (``_POSIX_SIGQUEUE_MAX``).
MIN_PENDING_SIGNALS = 32
#: The default queue's messages and their size (``msg_default``, ``msgsize_default``), where the
#: kernel cannot say.
DEFAULT_QUEUE = (10, 8192)


def limit_user_counts(workers: int) -> None:
    """Limit this process's user namespace to a share of each of the user's limits
    (:data:`USER_COUNTS`), and this process (so its programs) to a share of the queued signals
    (:func:`pending_signal_share`) and of the bytes of POSIX message queues the user may hold
    (``RLIMIT_MSGQUEUE``: the kernel checks a process's against what its user namespace holds,
    and the user's own against what the user holds in all, which one program took, and the
    user's own ``mq_open`` failed, red team): 1/:data:`USER_COUNT_SHARE` of each over the
    sandbox's ``workers``, and room for one queue of the default size at least (with more than
    ~10 workers, the shares add up to more than the user's quarter)."""
    for name, limit in USER_COUNTS.items():
        try:  # (fanotify's came with Linux 5.13)
            with open(f"/proc/sys/{limit}") as file:
                total = int(file.read())
        except FileNotFoundError:
            continue
        with open(f"/proc/sys/user/{name}", "w") as file:
            file.write(str(max(1, total // (USER_COUNT_SHARE * workers))))
    share = message_queue_share(workers)
    if share is not None:
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (share, share))
    signals = pending_signal_share(workers)
    if signals is not None:
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (signals, signals))


def pending_signal_share(workers: int) -> int | None:
    """The signals a worker's programs may hold queued (``RLIMIT_SIGPENDING``, which the kernel
    checks as ``RLIMIT_MSGQUEUE``: see :func:`limit_user_counts`), of this process's: a program
    that queued the user's whole budget to itself (``sigqueue``, a blocked real-time signal)
    left the user's own processes and the other workers' programs none, and their
    ``timer_create`` failed (red team); 1/:data:`USER_COUNT_SHARE` of it over the ``workers``,
    and POSIX's least (:data:`MIN_PENDING_SIGNALS`); None where it is unlimited."""
    return _share(resource.RLIMIT_SIGPENDING, workers, MIN_PENDING_SIGNALS)


def message_queue_share(workers: int) -> int | None:
    """The bytes of POSIX message queues a worker's programs may hold (see
    :func:`limit_user_counts`), of this process's ``RLIMIT_MSGQUEUE``; None where that is
    unlimited (no budget of the user's to leave room in)."""
    return _share(resource.RLIMIT_MSGQUEUE, workers, _default_queue_bytes())


def _share(limit: int, workers: int, least: int) -> int | None:
    """A worker's part of this process's (the user's) ``limit``: 1/:data:`USER_COUNT_SHARE` of
    it over the ``workers``, ``least`` at least (and never more than the whole); None where the
    limit is unlimited."""
    users = resource.getrlimit(limit)[0]
    if users == resource.RLIM_INFINITY:
        return None
    return min(users, max(users // (USER_COUNT_SHARE * workers), least))


def _default_queue_bytes() -> int:
    """What one POSIX message queue of this kernel's default size costs (see
    :data:`DEFAULT_QUEUE`)."""
    try:
        messages, size = (int(Path(f"/proc/sys/fs/mqueue/{name}").read_text())
                          for name in ("msg_default", "msgsize_default"))
    except (OSError, ValueError):
        messages, size = DEFAULT_QUEUE
    return messages * (size + MESSAGE_OVERHEAD)


def drop_capabilities() -> None:
    """Drop every capability (those a user namespace granted), so no program holds any."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    _check(_libc.capset(ctypes.byref(header), (_CapData * 2)()), "capset")


def _new_pid_namespace(own_mounts: bool) -> int:
    """Fork the init of a new PID namespace with its own ``/proc``; return its pid (0 in it).

    ``own_mounts``: also a new mount namespace (without root; as root the worker has one). The
    init dies with the process that forked it (PDEATHSIG; a pipe that the parent holds open
    until it exits covers a parent that died before the init could ask for that)."""
    unshare(CLONE_NEWPID)
    if own_mounts:
        new_mount_namespace()
    parent_r, parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(parent_w)
            _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
            if select.select([parent_r], [], [], 0)[0]:
                os._exit(70)  # the parent is already gone
            os.close(parent_r)
            _mount_proc()
        except BaseException:
            os._exit(70)
        return 0
    os.close(parent_r)  # parent_w stays open for the parent's lifetime
    return pid


@contextlib.contextmanager
def children_in_a_new_pid_namespace() -> Iterator[None]:
    """The first process this one starts within the block is the init of a new PID namespace,
    and any others it starts there join it; afterwards its children are made in its own again.
    (Needs CAP_SYS_ADMIN where it is used: as root, or before :func:`drop_capabilities`.)"""
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        unshare(CLONE_NEWPID)
        try:
            yield
        finally:
            _check(_libc.setns(own, CLONE_NEWPID), "setns(PID namespace)")
    finally:
        os.close(own)


def own_proc() -> None:
    """In the init of a new PID namespace: a mount namespace of its own where ``/proc`` shows
    that namespace (what :func:`pid_namespace` gives the worker)."""
    new_mount_namespace()
    _mount_proc()


#: What ``/proc`` shows of every uid's kernel keys that the reader may view, by type and name
#: (``krb_ccache:alice@CORP.EXAMPLE.COM``), and their counts: without root, the user's keys
#: (red team). A program reads them empty.
KEY_LISTS = ("/proc/keys", "/proc/key-users")


def _mount_proc() -> None:
    """Mount at ``/proc`` the proc file system of this process's PID namespace, its
    :data:`KEY_LISTS` hidden."""
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "mount /proc")
    hide_files([path for path in KEY_LISTS if os.path.exists(path)])


def _pid_namespace_works() -> None:
    """Try :func:`_new_pid_namespace` in a throwaway child (with its own mounts, so that its
    ``/proc`` does not stay behind); raise OSError if it fails."""
    probe = os.fork()
    if probe == 0:
        code = 1
        try:
            init = _new_pid_namespace(own_mounts=True)
            if init == 0:
                os._exit(0)
            code = os.waitstatus_to_exitcode(os.waitpid(init, 0)[1])
        finally:
            os._exit(code)
    if os.waitstatus_to_exitcode(os.waitpid(probe, 0)[1]) != 0:
        raise OSError(errno.EPERM, "a new PID namespace with its own /proc is not allowed here")


def pid_namespace(own_mounts: bool, watch: int | None = None) -> None:
    """Become the init (pid 1) of a new PID namespace whose ``/proc`` shows only it and what it
    starts: programs can neither see nor signal any process outside, and the kernel drops the
    unhandled signals they send the worker itself. The calling process stays outside, waits for
    the new worker and exits with its status; only the new worker returns.

    ``watch``: the write end of a pipe whose reader is the one the worker serves (its replies).
    When no reader is left (that process died without closing the worker down), the calling
    process kills the new worker, and with it every process of the namespace, at once: nothing
    waits out a program's time limit for nobody (the init dies with its parent)."""
    _pid_namespace_works()
    init = _new_pid_namespace(own_mounts)
    if init == 0:
        return
    waiting = select.poll()
    pidfd = os.pidfd_open(init)
    waiting.register(pidfd, select.POLLIN)
    if watch is not None:
        waiting.register(watch, 0)  # POLLERR alone: the pipe has no reader
    while True:
        events = dict(waiting.poll())
        if pidfd in events:
            break
        if events.get(watch, 0) & (select.POLLERR | select.POLLHUP):
            os.kill(init, signal.SIGKILL)
            break
    status = os.waitpid(init, 0)[1]
    os._exit(os.waitstatus_to_exitcode(status) % 256)


def isolate_worker(uid: int | None, allow_network: bool, needed: list[str],
                   homes: Sequence[str], replies: int | None = None,
                   hidden: Sequence[str] = (), workers: int = 1) -> tuple[Isolation, list[str]]:
    """Apply the per-worker walls; return what worked and why the rest did not.

    ``needed``: paths the programs must be able to read (see :func:`private_mounts`); ``homes``:
    the user's home directories (``$HOME``, the account's), hidden from programs without root
    (see :func:`read_only_files`);
    ``hidden``: files that programs must not load, where the worker has a mount namespace (see
    :func:`hide_files`);
    ``replies``: the pipe the worker answers on (see :func:`pid_namespace`); ``workers``: how
    many the sandbox has, which share the user's budgets (see :func:`limit_user_counts`). Without
    root, the capabilities the user namespace grants are left to the caller to drop
    (:func:`drop_capabilities`), once it has made its fork server's PID namespace.
    """
    problems: list[str] = []
    # First, whatever else stands: nothing the worker starts gains privileges through exec (a
    # set-user-ID root program such as mount or su would otherwise run as root, in front of the
    # host's system folders; so would file capabilities).
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")

    def wall(name: str, build: Callable[[], object]) -> bool:
        """Whether ``build`` went up; when it raised OSError, why is added to ``problems``."""
        try:
            build()
        except OSError as exc:
            problems.append(f"{name}: {exc}")
            return False
        return True

    def read_only_mounts() -> None:
        if not pidns:  # else the PID namespace came with a mount namespace of its own
            new_mount_namespace()
        read_only_files(needed, homes)

    root = os.getuid() == 0
    blocked = not allow_network
    # without root, only a user namespace grants what the other walls need (with the network
    # namespace, where the network is blocked)
    userns = not root and wall("user namespace", lambda: user_namespace(network=blocked))
    netns = blocked and (userns or root and wall("network namespace",
                                                 lambda: unshare(CLONE_NEWNET)))
    if userns:  # (as root, programs run as a uid of their own)
        wall("the programs' share of the user's inotify limits, message queues and signals",
             lambda: limit_user_counts(workers))
    filtered = wall("seccomp", lambda: load_filter(deny_sockets=blocked))
    seccomp = blocked and filtered
    may_unshare = root or userns
    ipcns = may_unshare and wall("IPC namespace", lambda: unshare(CLONE_NEWIPC))
    if ipcns:
        wall("System V shared memory limit", limit_shared_memory)
    mountns = root and wall("mount namespace", lambda: private_mounts(needed))
    if mountns and uid is not None:
        wall("a name for the programs' uid", lambda: name_the_uid(uid))
    if mountns:  # (a channel too narrow to refuse a machine over: a problem, if it fails)
        wall("no access times", no_access_times)
    pidns = may_unshare and wall("PID namespace",
                                 lambda: pid_namespace(own_mounts=not mountns, watch=replies))
    read_only = userns and wall("read-only file system", read_only_mounts)
    mountns = mountns or read_only
    if mountns and hidden:
        wall("hidden files", lambda: hide_files(hidden))
    queues = False
    if ipcns:
        try:
            if not mountns:
                raise OSError(errno.ENOTSUP, "no mount namespace of the worker's to list them in")
            queues = mount_message_queues()
        except OSError as exc:
            problems.append(f"POSIX message queues stay between programs: {exc}")
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")
    return Isolation(netns, seccomp, mountns, uid if root else None, pid_namespace=pidns,
                     read_only=read_only, ipc_namespace=ipcns, message_queues=queues,
                     no_keyrings=filtered, no_user_namespaces=filtered), problems


def _children(pid: int, task: int) -> list[int]:
    """The children of one thread (zombies included), from ``/proc/PID/task/TID/children``."""
    fd = os.open(f"/proc/{pid}/task/{task}/children", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 1 << 16)]
        while chunks[-1]:  # a seq_file gives about a page a read
            chunks.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return [int(child) for child in b"".join(chunks).split()]


def _descendants(root: int, spare: Collection[int] = ()) -> list[int]:
    """Every live descendant of ``root`` but those in ``spare`` and their own descendants."""
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = [int(task) for task in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for task in tasks:
            try:
                children = [c for c in _children(pid, task) if c not in spare]
            except OSError:
                continue
            found.extend(children)
            stack.extend(children)
    return found


def _reap() -> bool:
    """Reap the children that exited; whether none is left (then, as orphans are re-parented
    to this subreaper, no descendant is left either)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        return True
    return False


def _kill_uid(uid: int) -> None:
    """Run ``kill(-1, SIGKILL)`` as ``uid``: it reaches every process of that uid at once."""
    pid = os.fork()
    if pid == 0:
        try:
            drop_privileges(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


#: (pid, descriptor) of the sweeping process's own ``children`` file, kept open: after each
#: program one ``pread`` tells that no child but ``spare`` is left (see :func:`sweep`).
_OWN_CHILDREN: tuple[int, int] | None = None


def own_children() -> int:
    """A descriptor of this process's list of children, kept open."""
    global _OWN_CHILDREN
    me = os.getpid()
    if _OWN_CHILDREN is None or _OWN_CHILDREN[0] != me:  # (a forked copy opens its own)
        _OWN_CHILDREN = me, os.open(f"/proc/{me}/task/{me}/children", os.O_RDONLY | os.O_CLOEXEC)
    return _OWN_CHILDREN[1]


def _only_spare_children(spare: Collection[int]) -> bool:
    """Whether this process certainly has no child but ``spare`` (one read of its list; a list
    that may not have come whole in it says no)."""
    listed = os.pread(own_children(), 4096, 0)
    return len(listed) < 4000 and all(int(child) in spare for child in listed.split())


def sweep(uid: int | None, rounds: int = 200, spare: Collection[int] = ()) -> int:
    """Kill every leftover process of the sandbox; return how many were found.

    This worker is a subreaper, so every process a program started is its descendant, even one
    that called ``setsid``: when its parent dies it is re-parented here. Call this after the
    program's own process has been reaped. When root, ``kill(-1)`` as the sandbox uid also stops
    processes forked while the tree is being walked. ``spare``: the worker's fork server and
    compile server (other uids; once the server has reaped the program and killed what the
    program made its children, no program's ancestors).
    """
    with contextlib.suppress(OSError):  # the usual case, in one read: no child but ``spare``
        if _only_spare_children(spare):  # (orphans go to the main thread, the only)
            return 0
    me = os.getpid()
    kills = KillRounds(rounds)
    while True:
        if _reap():  # one system call when no child is left (as root the fork server stays)
            return len(kills.seen)
        alive = _descendants(me, spare)
        if not alive:
            return len(kills.seen)
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if uid is not None:
            _kill_uid(uid)
        pause = kills.wait(alive)
        if pause is None:
            raise OSError(f"processes of the sandbox outlast the kills ({len(alive)} of "
                          f"{len(kills.seen)} left)")
        time.sleep(pause)


def socket_count_file() -> int:
    """A descriptor of this network namespace's count of sockets (``/proc/self/net/sockstat``):
    it reads the namespace it was opened in, whatever ``/proc`` is mounted later."""
    return os.open("/proc/self/net/sockstat", os.O_RDONLY | os.O_CLOEXEC)


def socket_count(counted: int) -> int:
    """How many sockets the network namespace of ``counted`` (:func:`socket_count_file`) holds
    (~4 us: its first line, ``sockets: used N``)."""
    return int(os.pread(counted, 64, 0).split(b"\n", 1)[0].rsplit(b" ", 1)[1])


#: How long the worker waits for the kernel to free the sockets a program left in flight.
COLLECT_WAIT_S = 1.0


def collect_sockets_in_flight(counted: int, before: int, wait_s: float = COLLECT_WAIT_S) -> None:
    """Have the kernel free the sockets a program left in the worker's network namespace (its
    count, ``counted``: :func:`socket_count_file`), once no process of the program's is left,
    down to the ``before`` it started (the worker's servers' own: the Java compile server's JVM
    holds one); raise when more stay. Programs make Unix sockets only (seccomp), and one whose
    last reference is a message in flight (in its own queue, or a cycle of them) keeps what its
    messages carry, descriptors of files and with them their locks, and the name it is bound to,
    until the kernel's collector runs, which the program's end does not start (red team, without
    root: 2 GiB of unnamed files in the private ``/tmp`` and ``/dev/shm``, a lock on a file of the
    user's, an abstract name that a later program could not bind, the user's budget of message
    queues, all outlived the program and some the sandbox). A socket closed while its pair is in
    flight, carrying itself, starts it: :func:`start_socket_collector`."""
    deadline = time.monotonic() + wait_s
    while socket_count(counted) > before:
        if time.monotonic() > deadline:
            raise OSError("sockets a program left in flight outlast the kernel's collector")
        start_socket_collector()
        for _ in range(20):  # (the collector runs apart: a little while before the next call)
            time.sleep(0.001)
            if socket_count(counted) <= before:
                return


def start_socket_collector() -> None:
    """Have the kernel's collector of Unix sockets in flight run (it runs for every network
    namespace): close a socket while its pair, which carries itself, is in flight."""
    first, second = socket.socketpair()
    with first, second:
        socket.send_fds(first, [b"\0"], [second.fileno()])


def _listing(path: str) -> tuple[int, int, int, int, int]:
    """What changes when an entry is added to or removed from the directory ``path`` (on a file
    system whose directory size counts entries), or the directory is replaced, opened up or
    given other times."""
    status = os.lstat(path)
    return status.st_ino, status.st_mode, status.st_size, status.st_atime_ns, status.st_mtime_ns


#: Each private directory's (and the message queues' one) mode and times as mounted, which a
#: program that owns it (without root, programs own them all) may change, and the next read:
#: the worker sets them back whenever they changed (see :func:`_set_back`).
_AS_MOUNTED: dict[str, tuple[int, int, int]] = {}


#: Those of them whose size counts their entries (:func:`_size_counts_entries`).
_COUNTING: set[str] = set()


def _remember_as_mounted(path: str) -> None:
    with contextlib.suppress(OSError):  # no probe: the directory is listed every time
        if _size_counts_entries(path):
            _COUNTING.add(path)
    status = os.lstat(path)  # (after the probe, which changed its times)
    _AS_MOUNTED[path] = stat.S_IMODE(status.st_mode), status.st_atime_ns, status.st_mtime_ns


def _set_back(path: str) -> None:
    """Give ``path`` its mode and times as mounted (:data:`_AS_MOUNTED`), where it has others."""
    if path not in _AS_MOUNTED:
        return
    mode, atime, mtime = _AS_MOUNTED[path]
    status = os.lstat(path)
    if stat.S_IMODE(status.st_mode) != mode:
        os.chmod(path, mode)
    if (status.st_atime_ns, status.st_mtime_ns) != (atime, mtime):
        os.utime(path, ns=(atime, mtime), follow_symlinks=False)


def _size_counts_entries(path: str) -> bool:
    """Whether the size of the directory ``path`` changes with each entry made in it (tmpfs and
    the mqueue file system count 20 bytes an entry): then an unchanged :func:`_listing` of a
    directory left empty says that nothing was left in it, with one ``lstat`` instead of a
    listing. Found by making and removing one entry."""
    probe = os.path.join(path, f".hybridmetric-probe-{os.getpid()}")
    before = os.lstat(path).st_size
    os.close(os.open(probe, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    try:
        return os.lstat(path).st_size != before
    finally:
        os.unlink(probe)


#: The listing of each private directory (and the message queues' one) as last emptied, for
#: those whose size counts their entries; only an entry a program made changes it (no program
#: may remove or replace the directories' own entries: they are root's in a sticky directory,
#: mount points, or, without root, the worker's folder that :meth:`Worker._guard_root` checks).
_EMPTIED: dict[str, tuple[int, int, int, int, int]] = {}


def _emptied(path: str) -> bool:
    """Whether ``path`` is as it was last emptied (one ``lstat``); False when not known."""
    return path in _EMPTIED and _listing(path) == _EMPTIED[path]


def _remember_emptied(path: str) -> None:
    if path in _COUNTING:
        _EMPTIED[path] = _listing(path)


def counted_dirs(private_dirs: bool, queues: bool) -> list[str] | None:
    """The folders the sweep empties (the private temporary folders, where ``private_dirs``;
    the message queues', where ``queues``), where the size of each counts its entries, so that
    one ``lstat`` tells each was left as emptied (:func:`_emptied`); None where one does not."""
    paths = [*(COVERED if private_dirs else ()), *([MQUEUE_DIR] if queues else ())]
    return paths if all(path in _COUNTING for path in paths) else None


def empty_private_dirs(keep: str) -> None:
    """Remove whatever a program left in the worker's private tmpfs mounts (but ``keep``);
    raise when something stays."""
    for path in COVERED:
        if _emptied(path):
            continue
        for name in os.listdir(path):
            full = os.path.join(path, name)
            if full != keep and full not in PRESERVED and full not in COVERED:
                remove_tree(full)
        _set_back(path)
        _remember_emptied(path)


#: What the ``*_INFO`` calls fill (shm_info, seminfo, msginfo), made once.
_IPC_INFO = ((ctypes.c_int * 16)(), (ctypes.c_int * 10)(), (ctypes.c_int * 8)())


def ipc_objects_exist() -> bool:
    """Whether this IPC namespace holds any System V object (three ``*_INFO`` calls, cheaper
    than reading ``/proc/sysvipc``): ``shm_info.used_ids``, ``seminfo.semusz`` and
    ``msginfo.msgpool`` count the segments, semaphore sets and message queues. (The calls
    return the highest index in use, not 0, on success.)"""
    shm_info, seminfo, msginfo = _IPC_INFO
    if _libc.shmctl(0, SHM_INFO, shm_info) < 0:
        _check(-1, "shmctl(SHM_INFO)")
    if _libc.semctl(0, 0, SEM_INFO, seminfo) < 0:
        _check(-1, "semctl(SEM_INFO)")
    if _libc.msgctl(0, MSG_INFO, msginfo) < 0:
        _check(-1, "msgctl(MSG_INFO)")
    return bool(shm_info[0] or seminfo[7] or msginfo[0])


def remove_ipc_objects() -> int:
    """Remove the System V shared memory segments, semaphore sets and message queues in this
    IPC namespace (the worker's own: what programs left); return how many there were."""
    if not ipc_objects_exist():
        return 0
    removed = 0
    for kind in ("shm", "sem", "msg"):
        with open(f"/proc/sysvipc/{kind}") as handle:
            ids = [int(line.split()[1]) for line in handle.read().splitlines()[1:] if line.strip()]
        for ident in ids:
            if kind == "sem":
                _check(_libc.semctl(ident, 0, IPC_RMID), "semctl(IPC_RMID)")
            else:
                _check(getattr(_libc, f"{kind}ctl")(ident, IPC_RMID, None), f"{kind}ctl(IPC_RMID)")
            removed += 1
    return removed


#: The System V shared memory that programs may hold at once, all segments together: without a
#: memory cgroup no limit of a process's counts a segment that no process has attached.
SHARED_MEMORY_MB = 1024


def limit_shared_memory() -> None:
    """Cap the System V shared memory of this process's (own) IPC namespace at
    :data:`SHARED_MEMORY_MB` (its ``kernel.shmall`` and ``kernel.shmmax``). Where the kernel
    does not let the worker set them (inside a user namespace), programs get no segment at all:
    ``shmget`` fails as past the limit (ENOSPC)."""
    size = SHARED_MEMORY_MB * 2**20
    try:
        for name, value in (("shmall", size // os.sysconf("SC_PAGE_SIZE")), ("shmmax", size)):
            with open(f"/proc/sys/kernel/{name}", "w") as handle:
                handle.write(str(value))
    except PermissionError:
        _load_rules([(b"shmget", errno.ENOSPC, None)])


def mount_message_queues() -> bool:
    """Mount the IPC namespace's POSIX message queues at :data:`MQUEUE_DIR` (in the private
    ``/tmp``), where :func:`remove_message_queues` finds what programs leave; False where the
    kernel has none (``ENODEV``: nothing to clear). Raise when the mount fails otherwise."""
    os.mkdir(MQUEUE_DIR, 0o700)
    if _libc.mount(b"mqueue", MQUEUE_DIR.encode(), b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   None) != 0:
        code = ctypes.get_errno()
        os.rmdir(MQUEUE_DIR)
        if code == errno.ENODEV:
            return False
        raise OSError(code, f"mount mqueue on {MQUEUE_DIR}: {os.strerror(code)}")
    PRESERVED.add(os.path.realpath(MQUEUE_DIR))
    _remember_as_mounted(MQUEUE_DIR)
    return True


def remove_message_queues() -> int:
    """Remove the POSIX message queues of this IPC namespace (what programs left); return how
    many there were. Without root, the queues' root belongs to the user programs run as: one may
    have taken the write permission away, which the worker (its owner too) gives back first."""
    if _emptied(MQUEUE_DIR):
        return 0
    os.chmod(MQUEUE_DIR, 0o1777)
    names = os.listdir(MQUEUE_DIR)
    for name in names:
        os.unlink(os.path.join(MQUEUE_DIR, name))
    _set_back(MQUEUE_DIR)
    _remember_emptied(MQUEUE_DIR)
    return len(names)


def remove_tree(path: str) -> None:
    """Remove ``path`` (a file, a link, or a directory and all below it), even where a program
    run as the same user took the write permission away; raise when that fails."""
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return
    if not is_dir:
        os.unlink(path)
        return
    try:
        shutil.rmtree(path)
    except PermissionError:
        _unlock(path)
        shutil.rmtree(path)


def _unlock(top: str) -> None:
    """Give the owner every permission on ``top`` and the folders below it (never through a
    link), each before it is listed."""
    stack = [top]
    while stack:
        folder = stack.pop()
        os.chmod(folder, 0o700)
        with os.scandir(folder) as entries:
            stack += [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]


def tree_state(directory: str) -> tuple[tuple[str, int, int, int], ...] | None:
    """What tells that a directory's contents changed, without reading them: the inode, change
    time and size of it and of everything in it (None when it is gone). No one can set a change
    time back, so altering, adding or replacing anything there changes the state. Without root,
    programs run as the user who owns the trusted build outputs (the C++ build outputs, the
    compile server), which are checked against it after every program."""
    try:
        paths = [directory]
        for top, dirs, files in os.walk(directory, onerror=_raise):
            paths += [os.path.join(top, name) for name in dirs + files]
        return tuple((path, s.st_ino, s.st_ctime_ns, s.st_size)
                     for path in sorted(paths) for s in [os.lstat(path)])
    except (OSError, RecursionError):  # RecursionError: a tree deeper than os.walk reaches
        return None


def _raise(error: OSError) -> None:
    raise error
