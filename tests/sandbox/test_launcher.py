"""The fork server's protocol on its own (no namespaces: it runs programs as the test's user)."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import pytest

from hybridmetric.sandbox.launcher import ForkServer, LauncherError, LaunchFailed, set_dumpable

LIMITS = (2**30, 5, 2**26, 64, 512)  # memory, CPU seconds, file size, open files, processes


def _passed(reply: tuple) -> bool:
    status, timed_out, report, token, *_ = reply
    return os.waitstatus_to_exitcode(status) == 0 and not timed_out and report == b"T" + token


def test_a_launch_that_fails_leaves_the_server_running(tmp_path: Path) -> None:
    """No descriptor left for a program's pipes: that launch fails, nothing leaks, the server
    runs the next one."""
    if os.getuid() != 0:
        pytest.skip("the server is not dumpable: only root may list its descriptors")
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [])
    request = (None, "print('hello')\nassert 1 + 1 == 2\n", LIMITS, 5.0)
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


def test_a_server_that_dies_is_reported_and_stopped(tmp_path: Path) -> None:
    server = ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), [])
    assert server.pid is not None
    os.kill(server.pid, 9)
    with pytest.raises(LauncherError, match="fork server failed"):
        server.launch((None, "pass\n", LIMITS, 5.0))
    assert server.pid is None and not server.alive()


def test_a_preload_that_does_not_import_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(LauncherError, match="(?s)did not start.*no_such_module_xyz"):
        ForkServer(None, None, {"PATH": os.defpath}, str(tmp_path), ["no_such_module_xyz"])


def test_a_failing_prctl_still_says_why() -> None:
    """The children's ``prctl`` goes around ctypes' errno copy (through it, a child paid about
    65 more page faults); a failure still carries its errno."""
    with pytest.raises(OSError) as failure:
        set_dumpable(5)  # type: ignore[arg-type]  # no such mode: EINVAL, nothing changes
    assert failure.value.errno == errno.EINVAL
