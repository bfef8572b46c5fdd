"""The C++ executable check (``languages.code_before_the_harness``) reads the dynamic loader's
tables as the loader finds them, through ``.dynamic``, and not only through the section headers,
which the loader never reads. Each executable here is built as the sandbox builds a program
(``languages.build``: the same compile, the harness's object, the same link) but past the
object check, and then given what the check must see through: no section headers at all, a
table that lies past the end of the file, or relative relocations packed as ``DT_RELR``
(``ld -z pack-relative-relocs``). Compared with what ``readelf`` (binutils) reads.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmetric.sandbox import languages

SORTS = """#include <bits/stdc++.h>
std::vector<int> sort_array(std::vector<int> v) { std::sort(v.begin(), v.end()); return v; }
int main() {
  auto candidate = sort_array;
  assert(candidate({3, 1, 2}) == (std::vector<int>{1, 2, 3}));
  std::cout << "sorted" << std::endl;
}
"""
#: A program that defines a function the dynamic loader defines and the C library calls as it
#: starts (before ``.preinit_array``: where a program could read the token first).
DEFINES_THE_LOADER_S_FUNCTION = """#include <cassert>
extern "C" void __tunable_get_val(unsigned, void *, void *) {}
int main() { assert(1 == 2); }
"""
#: A program whose bytes in a section named like the linker's relocations become a relocation
#: of the executable's (an R_X86_64_DTPOFF64 against no symbol: the loader would write its
#: addend at the address it names, which no test runs).
ADDS_A_RELOCATION = """#include <cassert>
asm(".section .rela.data.rel.zz,\\"a\\",@progbits\\n.balign 8\\n"
    ".quad 0x1000\\n.quad 17\\n.quad 0\\n.text\\n");
int main() { assert(1 == 2); }
"""
#: A correct program with an unloaded section aligned to 1 GiB: its object and executable are
#: files of a GiB that take no room on disk, nor in the program's memory (red-team round 13).
SPARSE = """#include <cassert>
asm(".pushsection .note.zz,\\"\\",@progbits\\n.p2align 30\\n.byte 1\\n.popsection");
int main() { assert(1 + 1 == 2); }
"""


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the sandbox's trusted build outputs: the harness's object, the precompiled
    ``<bits/stdc++.h>``."""
    folder = tmp_path_factory.mktemp("cxx")
    for command in (languages.compile_cpp_main(str(folder), languages.CPP_STANDARD),
                    languages.precompile_stdcxx(str(folder), languages.CPP_STANDARD)):
        subprocess.run(command, cwd=folder, check=True)
    return folder


def linked(trusted: Path, folder: Path, source: str, *flags: str) -> Path:
    """``source`` built as the sandbox builds it in ``folder`` (the link with ``flags`` more),
    without the check of its object."""
    folder.mkdir()
    (folder / "program.cpp").write_text(source)
    recipe = languages.build("cpp", source, 512, cxx=str(trusted))
    assert recipe.compile is not None and recipe.link is not None
    subprocess.run(recipe.compile, cwd=folder, check=True)
    subprocess.run([*recipe.link[:-1], *flags, recipe.link[-1]], cwd=folder, check=True)
    return folder / "program"


def headless(path: Path) -> Path:
    """A copy of the ELF executable ``path`` without section headers (``e_shoff``,
    ``e_shnum`` and ``e_shstrndx`` zero): the loader runs it as before."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)
    struct.pack_into("<HH", data, 0x3C, 0, 0)
    copy = path.with_name(path.name + "-headless")
    copy.write_bytes(data)
    copy.chmod(0o755)
    return copy


def as_loaded(path: Path) -> tuple[list[languages.Symbol], list[languages.Relocation]]:
    with languages._elf64(str(path)) as (data, order):
        assert order is not None
        machine = struct.unpack_from(order + "H", data, 0x12)[0]
        view = languages._loader_view(data, order, dict(languages._dynamic_tags(data, order)),
                                      machine)
    assert view is not None
    return view


def test_the_loader_s_view_is_the_section_headers_view(trusted: Path, tmp_path: Path) -> None:
    program = linked(trusted, tmp_path / "sorts", SORTS)
    symbols, relocations = as_loaded(program)
    with languages._elf64(str(program)) as (data, order):
        assert order is not None
        assert symbols == languages._dynamic_symbols(data, order)
        assert sorted(relocations) == sorted(languages._relocations(data, order))
    assert len(symbols) > 10 and len(relocations) > 10
    assert languages.code_before_the_harness(str(program)) == ""


def test_an_executable_without_section_headers_is_checked_as_it_runs(trusted: Path,
                                                                      tmp_path: Path) -> None:
    program = headless(linked(trusted, tmp_path / "sorts", SORTS))
    ran = subprocess.run([program], capture_output=True, text=True, check=True)
    assert ran.stdout == "sorted\n"  # (the loader never reads them)
    assert languages.code_before_the_harness(str(program)) == ""


def test_a_loader_function_of_the_program_s_is_found_without_section_headers(
        trusted: Path, tmp_path: Path) -> None:
    """(``-no-pie``: a position-independent executable without headers was refused, by chance,
    as leaving a slot of ``.preinit_array`` unfilled.)"""
    program = linked(trusted, tmp_path / "tunable", DEFINES_THE_LOADER_S_FUNCTION, "-no-pie")
    for path in (program, headless(program)):
        assert "defines __tunable_get_val" in languages.code_before_the_harness(str(path))


def test_a_relocation_of_the_program_s_is_found_without_section_headers(
        trusted: Path, tmp_path: Path) -> None:
    program = linked(trusted, tmp_path / "relocation", ADDS_A_RELOCATION)
    for path in (program, headless(program)):
        assert "a relocation (in a section named like the linker's) that writes what the " \
               "loader makes of a constant" in languages.code_before_the_harness(str(path))


def test_a_table_past_the_end_of_the_file_is_refused(trusted: Path, tmp_path: Path) -> None:
    program = linked(trusted, tmp_path / "sorts", SORTS)
    data = bytearray(program.read_bytes())
    order = languages._elf64_order(bytes(data[:64]))
    assert order is not None
    (start, size), = [(offset, length) for kind, offset, length, _
                      in languages._segments(bytes(data), order, in_file=True)
                      if kind == languages.PT_DYNAMIC]
    for entry in range(start, start + size, 16):
        if struct.unpack_from(order + "Q", data, entry)[0] == languages.DT_RELASZ:
            struct.pack_into(order + "Q", data, entry + 8, 2**40)
            break
    else:
        pytest.fail("no DT_RELASZ")
    program.write_bytes(data)
    assert "outside what it loads from its file" in languages.code_before_the_harness(
        str(program))


def test_a_truncated_executable_is_refused(trusted: Path, tmp_path: Path) -> None:
    program = linked(trusted, tmp_path / "sorts", SORTS)
    for size in (program.stat().st_size // 2, 4096, 100):
        with open(program, "r+b") as handle:
            handle.truncate(size)
        assert languages.code_before_the_harness(str(program)) != ""


@pytest.mark.parametrize(("words", "places"), [
    ([0x1000], [0x1000]),
    # a place, then a bitmap of the 63 words after it (bits 1 and 63), then the next 63 (bit 1)
    ([0x1000, 1 | 1 << 1 | 1 << 63, 1 | 1 << 1], [0x1000, 0x1008, 0x1008 + 8 * 62, 0x1200]),
    ([1 | 1 << 2], [8]),  # (a bitmap first: the words from 0)
    ([0x2000, 1, 0x3000], [0x2000, 0x3000]),
])
def test_packed_relocations_as_the_loader_unpacks_them(words: list[int], places: list[int]) -> None:
    """By hand, from the format (glibc's ``elf_dynamic_do_Relr``)."""
    packed = struct.pack(f"<{len(words)}Q", *words)
    assert languages._relr_places(packed, "<") == places


def readelf_relative(path: Path) -> list[int]:
    """The places of ``path``'s relative relocations as ``readelf -r`` lists them: those of
    ``.rela.dyn`` and each place it decodes from ``.relr.dyn`` (binutils 2.38 to 2.42 list one
    address a line; later ones otherwise: the test is then skipped)."""
    listing = subprocess.run([shutil.which("readelf") or "readelf", "-rW", str(path)],
                             capture_output=True, text=True, check=True).stdout
    places = [int(line.split()[0], 16) for line in listing.splitlines()
              if re.search(r"\s\S+_RELATIVE\s", line)]
    packed = listing.partition("'.relr.dyn'")[2].split("\n\n")[0].splitlines()[1:]
    if not (packed and re.fullmatch(r"\s*\d+ offsets?", packed[0])
            and all(re.fullmatch(r"[0-9a-f]{16}", line) for line in packed[1:])):
        pytest.skip("this readelf lists packed relocations in a form the test does not read")
    return places + [int(line, 16) for line in packed[1:]]


def test_packed_relative_relocations_are_read_as_the_loader_reads_them(
        trusted: Path, tmp_path: Path) -> None:
    """A link that packs its relative relocations (``.relr.dyn``, which the section headers'
    view does not read) fills the harness's slot of ``.preinit_array`` from there: once refused
    as leaving it unfilled."""
    try:
        program = linked(trusted, tmp_path / "packed", SORTS, "-Wl,-z,pack-relative-relocs")
    except subprocess.CalledProcessError:
        pytest.skip("this linker cannot pack relative relocations (binutils 2.38+)")
    with languages._elf64(str(program)) as (data, order):
        assert order is not None
        assert languages.DT_RELR in dict(languages._dynamic_tags(data, order))
        relative = languages.RELATIVE[struct.unpack_from(order + "H", data, 0x12)[0]]
    _, relocations = as_loaded(program)
    expected = readelf_relative(program)
    assert len(expected) > 5
    assert sorted(where for where, kind, _ in relocations if kind == relative) == sorted(expected)
    for path in (program, headless(program)):
        assert languages.code_before_the_harness(str(path)) == ""
    assert subprocess.run([program], capture_output=True, text=True,
                          check=True).stdout == "sorted\n"


def test_a_gigabyte_of_holes_is_mapped_not_read(trusted: Path, tmp_path: Path) -> None:
    """The check reads what it needs of the executable: one of a GiB, nearly all holes, does
    not put a GiB in the worker's memory."""
    program = linked(trusted, tmp_path / "sparse", SPARSE)
    assert program.stat().st_size > 2**30 > 2**4 * program.stat().st_blocks * 512
    checked = subprocess.run(
        [sys.executable, "-c", "import resource, sys\n"
         "from hybridmetric.sandbox import languages\n"
         "assert languages.code_before_the_harness(sys.argv[1]) == ''\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n", str(program)],
        capture_output=True, text=True, check=True)
    assert int(checked.stdout) < 2**19  # KiB: under 512 MiB at its peak
