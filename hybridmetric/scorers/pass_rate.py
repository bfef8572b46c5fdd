"""Unit-test pass rate: run each candidate's tests in the sandbox (``hybridmetric.sandbox``).

For a row with ``tests``, case ``i`` runs ``prefix + candidate + suffix + cases[i]`` in the tests'
language (else the row's), the case on a line of its own that no comment or line continuation
of the candidate's reaches (:func:`own_line`). A case passes only when the sandbox receives the
run's secret token after the test code finished (see ``hybridmetric/sandbox/languages.py``).

Columns:

- ``score.pass_rate``: the fraction of cases passed;
- ``score.pass``: 1.0 when every case passed, else 0.0 (PASS in Dibia et al. 2022,
  arXiv 2210.16494; pass@1 of Chen et al. 2021 for one sample);
- ``outcomes.pass_rate`` (``detail_columns``, not a score): per case,
  ``{"outcome": ..., "error": ...}`` with the outcome (passed, failed, timeout, memory, crash,
  syntax_error) and the capped error text.

Rows without ``tests``, or with no cases, get NaN and an empty outcome list. A sandbox failure is
an error, never a score. Verdicts are cached (setting ``cache``; by default in the user's cache
directory), so re-scoring the same programs under the same limits and runtimes costs a lookup.
"""

from __future__ import annotations

import math
import os
import sqlite3
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from hybridmetric.sandbox import SANDBOX_ERROR, Limits, Program, Sandbox, canonical
from hybridmetric.sandbox.cache import SANDBOX_VERSION, ResultCache
from hybridmetric.sandbox.isolation import Isolation
from hybridmetric.sandbox.languages import CPP_STANDARD, DEFAULT_JAVA_CLASSPATH, cxx_flags
from hybridmetric.sandbox.limits import MAX_TIMEOUT_S
from hybridmetric.sandbox.pool import UID_SLOTS
from hybridmetric.schema import DEFAULT_LANGUAGE, SCORE_PREFIX, row_label
from hybridmetric.scorers.base import Scorer, Setting, languages_of
from hybridmetric.signature import say


def _warn(message: str) -> None:
    say(f"hybridmetric: {message}")


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def check_sandbox_settings(settings: dict[str, Any], owner: str) -> None:
    """Refuse, naming them as ``owner``'s, sandbox settings no sandbox takes (at once, not at
    the first row that takes them)."""
    if not 0 < settings["timeout_s"] <= MAX_TIMEOUT_S:
        raise ValueError(f"setting '{owner}.timeout_s' must be a positive number of seconds, "
                         f"at most {MAX_TIMEOUT_S:g} (a day), got {settings['timeout_s']!r}")
    if settings["workers"] > UID_SLOTS:
        raise ValueError(f"setting '{owner}.workers' must be at most {UID_SLOTS} (0: one per "
                         f"core), got {settings['workers']!r}")
    cxx_flags(settings["cpp_standard"])


def own_line(head: str, case: str) -> str:
    """``head`` (prefix, candidate and suffix) as a case follows it: the case starts on a line of
    its own, which neither an open comment (``#``, ``//``) nor a line continuation at the end of
    the head reaches, so that the candidate cannot make the case's first line part of its own
    last line (an assert commented out, or joined to ``if 0:``). Where the head ends without a
    line break, and the case starts without one, a newline goes between them; where its last
    line may continue (it ends in a backslash, or g++'s ``??/`` trigraph, spaces after either
    allowed), a blank line more, which the continuation takes. (What the candidate's code does
    to the tests that follow, as a macro that redefines ``assert``, or JavaScript's ``if (0)``
    before a case's first statement, is its own: see docs/SANDBOX.md.)"""
    if not head:
        return head
    ended = head.endswith(("\n", "\r"))
    last = head[:-2] if head.endswith("\r\n") else head[:-1] if ended else head
    if last.rstrip(" \t\f\v").endswith(("\\", "??/")):
        # (a lone carriage return and an added newline would make one line break, "\r\n")
        return head + ("\n" if head.endswith("\n") else "\n\n")
    if ended or case.startswith(("\n", "\r")):
        return head
    return head + "\n"


class PassRate(Scorer):
    name = "pass_rate"
    needs = ("tests",)
    version = "2"  # 2: a case starts on a line of its own (own_line)
    description = ("fraction of unit-test cases passed, run in an isolated sandbox (Python, "
                   "JavaScript, C++, Java)")
    settings_spec: ClassVar[dict[str, Setting]] = {
        "timeout_s": Setting(10.0, "wall-clock seconds per case (a row's tests.timeout_s wins)"),
        "memory_mb": Setting(1024, "memory per program, in MiB (a memory cgroup's limit where "
                                   "there is one, else RLIMIT_DATA; at least 32: below, an "
                                   "interpreter's own start-up may not fit)",
                             at_least=32),
        "workers": Setting(0, f"sandbox worker processes (up to {UID_SLOTS}); 0 = one per core",
                           at_least=0),
        "pin_cpus": Setting(True, "keep each sandbox worker and its programs on one core (off "
                                  "where other work keeps the cores busy)"),
        "allow_network": Setting(False, "run with no network block (only for trusted tests "
                                        "that need it)"),
        "allow_file_writes": Setting(False, "run without root where programs, which then run "
                                            "as you, could change your files (no user "
                                            "namespaces): only for trusted tests"),
        "preload": Setting("", "comma-separated modules the Python fork server imports once, "
                               "e.g. numpy,pandas"),
        "java_classpath": Setting(":".join(DEFAULT_JAVA_CLASSPATH),
                                  "colon-separated jars Java tests compile and run against"),
        "cpp_standard": Setting(CPP_STANDARD, "the C++ standard C++ tests compile under, as "
                                              "g++'s -std= (c++11, c++20, gnu++17, ...)"),
        "cache": Setting("auto", "SQLite file caching verdicts by program, limits and runtime; "
                                 "auto: $XDG_CACHE_HOME/hybridmetric/verdicts.sqlite (else "
                                 "~/.cache/...); none: no cache", kind=str, signed=False),
    }

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        check_sandbox_settings(self.settings, self.name)
        cache = self.settings["cache"]
        if cache is None or cache.strip().lower() in ("", "none", "null"):
            self.settings["cache"] = None  # `--set pass_rate.cache=none` on the command line
        self._sandbox: Sandbox | None = None

    def cache_path(self) -> str | None:
        """The verdict cache's file: the setting's, or for ``auto`` the user's cache directory
        ($XDG_CACHE_HOME when it is absolute, else ~/.cache); None for ``none``, or where
        ``auto`` finds no absolute directory (no HOME)."""
        cache = self.settings["cache"]
        if cache != "auto":
            return cache
        top = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(top):  # the XDG spec: a relative value is to be ignored
            home = os.path.expanduser("~")
            if not os.path.isabs(home):
                return None
            top = os.path.join(home, ".cache")
        return os.path.join(top, "hybridmetric", "verdicts.sqlite")

    @classmethod
    def column_names(cls, name: str | None = None) -> list[str]:
        """``score.pass_rate``, ``score.pass``; under an alias A: ``score.A``, ``score.A.pass``."""
        if name is None or name == cls.name:
            return [SCORE_PREFIX + "pass_rate", SCORE_PREFIX + "pass"]
        return [SCORE_PREFIX + name, f"{SCORE_PREFIX}{name}.pass"]

    @property
    def detail_columns(self) -> list[str]:
        """The non-score column with the per-case outcomes: ``outcomes.<name or alias>``."""
        return [f"outcomes.{self.alias}"]

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            modules = [m.strip() for m in self.settings["preload"].split(",") if m.strip()]
            jars = [p for p in self.settings["java_classpath"].split(":") if p]
            sandbox = Sandbox(workers=self.settings["workers"],
                              allow_network=self.settings["allow_network"], preload=modules,
                              java_classpath=jars, pin_cpus=self.settings["pin_cpus"],
                              cpp_standard=self.settings["cpp_standard"],
                              allow_file_writes=self.settings["allow_file_writes"])
            try:
                sandbox.cache = self._open_cache(sandbox.isolation)
            except BaseException:
                sandbox.close()
                raise
            self._sandbox = sandbox
        return self._sandbox

    def _open_cache(self, isolation: Isolation) -> ResultCache | None:
        """The verdict cache, or None. A file given by name must open for writing; ``auto`` is
        used where it can be, else a warning says why not."""
        auto, path = self.settings["cache"] == "auto", self.cache_path()
        if path is None:
            if auto:
                _warn("no absolute cache directory ($XDG_CACHE_HOME or HOME): verdicts are "
                      "not cached; give a file with --set pass_rate.cache=FILE")
            return None
        if auto and isolation.uid is None and not isolation.read_only:
            _warn(f"programs run as this user and may write its files here (no user namespace), "
                  f"so they could plant verdicts in the default cache {path}; verdicts are not "
                  "cached (--set pass_rate.cache=FILE caches them anyway)")
            return None
        try:
            return ResultCache(path)
        except (OSError, sqlite3.Error) as exc:
            message = f"the verdict cache {path} cannot be opened for writing ({exc})"
            if not auto:
                raise OSError(f"{message}; give another file (--set pass_rate.cache=FILE) or "
                              "none") from exc
            _warn(f"{message}; verdicts are not cached (--set pass_rate.cache=FILE or none)")
            return None

    def signature_fields(self) -> dict[str, Any]:
        fixed = Limits()
        return {"sandbox": SANDBOX_VERSION, "isolation": self.sandbox.isolation.walls,
                **self.sandbox.toolchains(),
                "file_mb": fixed.file_mb, "open_files": fixed.open_files,
                "processes": fixed.processes, "compile_timeout_s": fixed.compile_timeout_s}

    def programs_of(self, frame: pd.DataFrame) -> list[list[Program]]:
        """The programs of each row (one per case); an empty list for rows without tests."""
        tests_column = frame["tests"] if "tests" in frame.columns else [None] * len(frame)
        languages = languages_of(frame)
        rows: list[list[Program]] = []
        for position, (candidate, tests, row_language) in enumerate(
                zip(frame["candidate"], tests_column, languages, strict=True)):
            if not _present(tests):
                rows.append([])
                continue
            where = f"{row_label(frame, position)} (task_id {frame['task_id'].iloc[position]!r})"
            if tests.get("network") and not self.settings["allow_network"]:
                raise ValueError(f"{where}, field 'tests': they need the network; allow it with "
                                 "--set pass_rate.allow_network=true if you trust them")
            language = tests.get("language") or row_language
            try:
                language = canonical(language)
            except ValueError as exc:
                raise ValueError(f"{where}, field 'tests': {exc}") from None
            try:
                own = canonical(row_language)  # (languages_of: python where none is given)
            except ValueError:
                own = row_language
            if own not in (language, DEFAULT_LANGUAGE):  # (python: the default, maybe unsaid)
                raise ValueError(f"{where}, field 'language': the row's language is "
                                 f"{row_language!r} but its tests' is {tests['language']!r}; "
                                 "make them agree")
            timeout = tests.get("timeout_s") or self.settings["timeout_s"]
            try:
                limits = Limits(timeout_s=float(timeout), memory_mb=self.settings["memory_mb"])
            except ValueError as exc:
                raise ValueError(f"{where}, field 'tests': {exc}") from None
            head = tests.get("prefix", "") + candidate + tests.get("suffix", "")
            starts = [own_line(head, case) for case in tests["cases"]]
            rows.append([Program(language, start + case, limits, tail_at=len(start))
                         for start, case in zip(starts, tests["cases"], strict=True)])
        return rows

    def check(self, frame: pd.DataFrame) -> None:
        self.programs_of(frame)

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        per_row = self.programs_of(frame)
        flat = [program for programs in per_row for program in programs]
        results = self.sandbox.run(flat) if flat else []
        rate = np.full(len(frame), np.nan)
        passed_all = np.full(len(frame), np.nan)
        details: list[list[dict[str, str]]] = []
        start = 0
        for position, programs in enumerate(per_row):
            mine = results[start:start + len(programs)]
            start += len(programs)
            for result in mine:
                if result.outcome == SANDBOX_ERROR:
                    raise RuntimeError(
                        f"{row_label(frame, position)} (task_id "
                        f"{frame['task_id'].iloc[position]!r}): the sandbox failed, so no "
                        f"verdict exists: {result.error}")
            details.append([{"outcome": r.outcome, "error": r.error} for r in mine])
            if mine:
                passed = sum(r.outcome == "passed" for r in mine)
                rate[position] = passed / len(mine)
                passed_all[position] = float(passed == len(mine))
        pass_rate_column, pass_column = self.columns
        return pd.DataFrame({pass_rate_column: rate, pass_column: passed_all,
                             self.detail_columns[0]: details}, index=frame.index)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
