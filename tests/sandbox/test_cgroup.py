"""What a worker's memory cgroup does with what a program left charged there
(``MemoryCgroup.reclaim_leftover``), on folders of files laid out as cgroup v1 and v2 lay them
out, whose numbers the test sets: where the charge is page cache, or within the room left, it
asks for nothing; beyond, it asks the kernel for it back (v2: ``memory.reclaim``; v1: a limit
below the charge, then the limit again), and raises where it stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridmetric.sandbox import cgroup
from hybridmetric.sandbox.cgroup import V1, V2, MemoryCgroup

MIB = 2**20


def fake(folder: Path, layout: cgroup._Layout, usage: int, page_cache: int) -> MemoryCgroup:
    """A cgroup of ``layout`` in ``folder`` charged ``usage`` bytes, ``page_cache`` of them
    page cache."""
    files = {"cgroup.procs": "", layout.events: "oom_kill 0\n", layout.usage: f"{usage}\n",
             "memory.stat": f"anon 0\n{layout.page_cache.decode()} {page_cache}\nshmem 0\n",
             layout.limit: "max\n"}
    if layout.swap_limit:
        files[layout.swap_limit] = "max\n"
    if layout.reclaim:
        files[layout.reclaim] = ""
    for name, text in files.items():
        (folder / name).write_text(text)
    group = MemoryCgroup(str(folder), layout)
    group.prepare(512)
    return group


@pytest.mark.parametrize("layout", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize(("usage_mb", "page_cache_mb"), [(8, 0), (400, 390)])
def test_what_fits_or_is_page_cache_is_left_alone(tmp_path: Path, layout: cgroup._Layout,
                                                   usage_mb: int, page_cache_mb: int) -> None:
    group = fake(tmp_path, layout, usage_mb * MIB, page_cache_mb * MIB)
    group.reclaim_leftover()
    assert (tmp_path / layout.limit).read_text() == str(512 * MIB)  # (as prepare set it)
    if layout.reclaim:
        assert (tmp_path / layout.reclaim).read_text() == ""


@pytest.mark.parametrize("layout", [V1, V2], ids=["v1", "v2"])
def test_what_stays_charged_is_asked_back_then_refused(tmp_path: Path,
                                                       layout: cgroup._Layout) -> None:
    """The files here never change: the kernel gives nothing back, so the worker must retire."""
    group = fake(tmp_path, layout, 300 * MIB, 100 * MIB)
    writes, write = [], group._write

    def recorded(name: str, value: str) -> None:
        writes.append((name, int(value) // MIB))
        write(name, value)

    group._write = recorded  # type: ignore[method-assign]
    with pytest.raises(OSError, match="200 MiB that programs left charged"):
        group.reclaim_leftover()
    if layout.reclaim:  # v2: what is charged but the page cache, asked back, each round
        assert writes == [(layout.reclaim, 200)] * cgroup.RECLAIM_ROUNDS
    else:  # v1: a limit below the charge, then the next program's again, each round
        low, limits = cgroup.LEFTOVER_MB, group._limit_files
        assert writes == [*((name, low) for name in limits),
                          *((name, 512) for name in limits)] * cgroup.RECLAIM_ROUNDS
    assert (tmp_path / layout.limit).read_text() == str(512 * MIB)


def test_a_charge_the_kernel_gives_back_is_no_cause_to_retire(tmp_path: Path) -> None:
    group = fake(tmp_path, V2, 300 * MIB, 100 * MIB)
    writes = []

    def reclaimed(name: str, value: str) -> None:
        writes.append((name, value))
        (tmp_path / V2.usage).write_text(f"{110 * MIB}\n")  # (the page cache, and 10 MiB)

    group._write = reclaimed  # type: ignore[method-assign]
    group.reclaim_leftover()
    assert writes == [(V2.reclaim, str(200 * MIB))]


def test_the_room_counts_each_cpu_s_stock() -> None:
    assert cgroup.leftover_room() >= cgroup.LEFTOVER_MB * MIB + 64 * 4096
