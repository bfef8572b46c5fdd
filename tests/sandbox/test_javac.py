"""The warm Java compile server: it outlives programs, restarts after a timeout, keeps its files."""

from __future__ import annotations

import os
import re

import pytest

from hybridmetric.sandbox import FAILED, PASSED, SYNTAX_ERROR, TIMEOUT, Limits, Program, Sandbox
from hybridmetric.sandbox.javac import DIAGNOSTICS_KEPT, UID_OFFSET

QUICK = Limits(timeout_s=5.0, memory_mb=512)
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="the uid drop needs root")

PASSING = ("class Problem {\n  public static void main(String[] a) {\n"
           "    if (Math.max(2, 3) != 3) throw new AssertionError();\n  }\n}\n")

#: Fails with the pids and uids of every compile server it can see in /proc.
REPORT_SERVER = """import java.nio.file.*;
class Problem {
  public static void main(String[] a) throws Exception {
    StringBuilder seen = new StringBuilder();
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(Paths.get("/proc"))) {
      for (Path entry : entries) {
        try {
          String line = new String(Files.readAllBytes(entry.resolve("cmdline")));
          if (line.contains("HybridmetricJavac")) {
            seen.append(" server=").append(entry.getFileName())
                .append(" uid=").append(Files.getAttribute(entry, "unix:uid"));
          }
        } catch (Exception gone) { }
      }
    }
    throw new AssertionError(seen.toString());
  }
}
"""

#: Tries to replace the wrapper class the sandbox compiled next to it.
OVERWRITE_CLASSES = """import java.io.*;
class Problem {
  public static void main(String[] a) throws Exception {
    String here = hybridmetric_harness.HybridmetricMain.class.getProtectionDomain()
        .getCodeSource().getLocation().getPath();
    try (FileOutputStream out = new FileOutputStream(
        here + "/hybridmetric_harness/HybridmetricMain.class")) {
      out.write(0);
    }
  }
}
"""


def _servers(error: str) -> list[tuple[str, int]]:
    return [(pid, int(uid)) for pid, uid in re.findall(r"server=(\d+) uid=(\d+)", error)]


@needs_root
def test_one_server_compiles_every_program_and_survives_the_sweep() -> None:
    with Sandbox(workers=1) as box:
        first, second = (box.run([Program("java", REPORT_SERVER + f"// {i}\n", QUICK)])[0]
                         for i in range(2))
        assert first.outcome == second.outcome == FAILED
        [uid] = box.uids
        ours = [[pid for pid, owner in _servers(r.error) if owner == uid + UID_OFFSET]
                for r in (first, second)]
        assert len(ours[0]) == 1
        assert ours[0] == ours[1]  # the same server, still alive after the first program
        assert not [pid for pid, owner in _servers(first.error) if owner in (0, uid)]


def test_a_compile_over_its_limit_is_a_timeout_and_the_server_restarts() -> None:
    with Sandbox(workers=1) as box:
        [slow] = box.run([Program("java", PASSING, Limits(timeout_s=2.0, compile_timeout_s=1e-3))])
        assert slow.outcome == TIMEOUT and "compiling took over" in slow.error
        [fine] = box.run([Program("java", PASSING, QUICK)])
        assert fine.outcome == PASSED
        [broken] = box.run([Program("java", PASSING.replace("3)", "3"), QUICK)])
        assert broken.outcome == SYNTAX_ERROR and broken.error.startswith("Program.java:3: error:")


def test_a_program_cannot_rewrite_its_compiled_classes(sandbox: Sandbox) -> None:
    [result] = sandbox.run([Program("java", OVERWRITE_CLASSES, QUICK)])
    assert result.outcome == FAILED
    assert "Permission denied" in result.error or "AccessDenied" in result.error


@needs_root
def test_javac_s_diagnostics_reach_the_worker_cut_to_their_ends(sandbox: Sandbox) -> None:
    """Five errors on a line of 300,000 characters, which javac quotes at each (1.5 MB): the
    server sends their first and last DIAGNOSTICS_KEPT bytes, not all (a 3 MB line quoted 100
    times held a worker for minutes), and the verdict keeps javac's last words."""
    line = "  int x = a0 + a1 + a2 + a3 + a4;" + " " * 300_000
    source = f"class Problem {{\n{line}\n  public static void main(String[] a) {{ }}\n}}\n"
    [result] = sandbox.run([Program("java", source, QUICK)])
    assert result.outcome == SYNTAX_ERROR
    assert result.error.rstrip().endswith("5 errors")
    cut = int(re.search(r"\.\.\.\[(\d+) chars cut\]\.\.\.", result.error).group(1))
    assert cut < 2 * DIAGNOSTICS_KEPT < 5 * 300_000
