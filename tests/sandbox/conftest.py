"""Shared fixtures: one sandbox for the whole sandbox suite, and checks that the host is intact."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from hybridmetric.sandbox import PASSED, Limits, Program, RunResult, Sandbox, cgroup

QUICK = Limits(timeout_s=2.0, memory_mb=512)
MARK = "hm_hostile_marker"
WATCHED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/etc", "/root")


def needs_root() -> None:
    if os.getuid() != 0:
        pytest.skip("the full sandbox (uid drop, namespaces) needs root")


def _children() -> list[int]:
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as handle:
            found += [int(pid) for pid in handle.read().split()]
    return found


def _cgroups(parent: str) -> set[str]:
    if not os.path.isdir(parent):
        return set()
    return {name for name in os.listdir(parent) if name.startswith("hybridmetric-")}


@pytest.fixture(scope="session", autouse=True)
def no_leftovers() -> Iterator[None]:
    """After the whole sandbox suite: no worker or program process left, no temp dirs."""
    before = set(os.listdir("/tmp"))
    groups = {parent: _cgroups(parent) for parent, _ in cgroup.parents()}
    yield
    assert _children() == []
    assert [n for n in set(os.listdir("/tmp")) - before if n.startswith("hybridmetric")] == []
    for parent, existed in groups.items():  # the workers' memory cgroups are gone too
        assert _cgroups(parent) - existed == set()


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    needs_root()
    with Sandbox(workers=2) as box:
        yield box


def processes_of(uids: set[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid in uids:
                    found.append(int(entry))
            except FileNotFoundError:
                continue
    return found


def assert_host_untouched(box: Sandbox) -> None:
    """No process of the sandbox's uids is alive, no marker file reached the host, and the
    sandbox still gives a correct verdict."""
    assert processes_of(set(box.uids)) == []
    for folder in WATCHED_DIRS:
        if os.path.isdir(folder):
            assert not [name for name in os.listdir(folder) if MARK in name], folder
    [check] = box.run([Program("python", "assert sum([1, 2]) == 3\n", QUICK)])
    assert check.outcome == PASSED


def run_one(box: Sandbox, language: str, source: str, limits: Limits = QUICK) -> RunResult:
    [result] = box.run([Program(language, source, limits)])
    return result


@pytest.fixture
def untouched() -> Callable[[Sandbox], None]:
    """``untouched(box)`` asserts the host is intact after a program ran in ``box``."""
    return assert_host_untouched


@pytest.fixture
def run() -> Callable[..., RunResult]:
    """``run(box, language, source, limits=QUICK)``: the verdict on one program."""
    return run_one
