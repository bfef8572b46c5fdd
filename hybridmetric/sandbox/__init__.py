"""Isolated execution of untrusted generated programs, with verdicts that cannot be faked.

``Sandbox`` (a pool of isolated workers: a fork server for Python, node, g++ with a precompiled
``<bits/stdc++.h>``, a warm javac for Java), ``Program``, ``Limits``, ``RunResult``, the outcome
names, and ``pass_at_k`` (with ``pass_at_k_table``, its mean over a scored table's tasks).

Walls (``isolation.py``, ``cgroup.py``): per worker a network namespace (without root, inside a
user namespace), a seccomp filter (sockets other than AF_UNIX, io_uring, the kernel keyring,
BPF, performance counters, userfaultfd, leases, new user namespaces, extended attributes and
inode flags fail; without a memory cgroup, each program adds ``memfd_create``), PID and IPC
namespaces (its own ``/proc``, whose init is the worker; without root, programs in one more,
whose init is the fork server), a mount namespace with private tmpfs ``/tmp``-like
directories, a ``/dev`` of its own (the devices any process may use) and the host's own
folders hidden (without root, every other mount read-only), and,
as root, a memory cgroup for the program's process tree. Per program: its
own session, rlimits (data, CPU, file size, open files, processes; without a memory cgroup, address
space for Python and C++, which can make shared memory), a private working directory,
stdin from /dev/null, capped output, a clean environment and, as root, an unprivileged uid whose
processes are all killed afterwards. A sandbox that gets no network block refuses to start
unless ``allow_network``, and one whose programs would run as the caller with nothing
read-only (without root, no user namespace) unless ``allow_file_writes``;
``Sandbox.isolation`` records which walls a machine gave.

Verdicts (``languages.py``): a program passes only when a per-run token, which the harness takes
from fd 3 before the program runs, comes back on fd 4 after the tests ran and the process exits
with status 0.
"""

from hybridmetric.sandbox.languages import LANGUAGES, canonical
from hybridmetric.sandbox.limits import (
    CRASH,
    FAILED,
    MEMORY,
    OUTCOMES,
    PASSED,
    SANDBOX_ERROR,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    RunResult,
)
from hybridmetric.sandbox.passk import pass_at_k, pass_at_k_table
from hybridmetric.sandbox.pool import Program, Sandbox

__all__ = [
    "CRASH", "FAILED", "LANGUAGES", "MEMORY", "OUTCOMES", "PASSED", "SANDBOX_ERROR",
    "SYNTAX_ERROR", "TIMEOUT", "Limits", "Program", "RunResult", "Sandbox", "canonical",
    "pass_at_k", "pass_at_k_table",
]
