"""A persistent cache of verdicts keyed by (language, program, limits, network, Java classpath,
isolation, sandbox version, and the runtime: the version of the interpreter or compiler, the
modules the Python fork server preloads, the Java jars' sizes and times, the C++ standard).
Libraries a program imports are not in the key: after upgrading them, delete the cache file.

Re-scoring a table whose programs were already run costs a lookup. Sandbox failures are never
cached; timeouts are, like any verdict (delete the file to run them again). SQLite; several
processes may share a file (a writer waits up to a minute for another's lock).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hybridmetric.sandbox.limits import SANDBOX_ERROR, Limits, RunResult

#: Bump when a change in the sandbox can change a verdict; old entries then stop matching.
SANDBOX_VERSION = "97"


def cache_key(language: str, source: str, limits: Limits, allow_network: bool,
              java_classpath: Sequence[str] = (), walls: str = "", runtime: str = "") -> str:
    """``walls``: the isolation a verdict was reached under (a memory cgroup can turn a pass
    into ``memory``), as :meth:`Isolation.walls` names it; ``runtime``: what ran the program
    and its version (:meth:`Sandbox.runtime`)."""
    digest = _settings(language, limits, allow_network,
                       tuple(java_classpath) if language == "java" else (), walls, runtime).copy()
    digest.update(source.encode("utf-8", "surrogatepass"))  # (last: no field follows)
    return digest.hexdigest()


@functools.lru_cache(maxsize=64)
def _settings(language: str, limits: Limits, allow_network: bool, java_classpath: tuple[str, ...],
              walls: str, runtime: str) -> Any:
    """The hash of everything in a key but the program (a run has few such settings)."""
    fields = [SANDBOX_VERSION, language, limits.as_dict(), allow_network, list(java_classpath),
              walls, runtime]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode() + b"\0")


class ResultCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, result TEXT NOT NULL)"
        )
        self._db.commit()
        self._db.execute("BEGIN IMMEDIATE")  # fails now, not after the first programs ran,
        self._db.rollback()  # where the file is read-only (or locked for over a minute)

    def get_many(self, keys: Iterable[str]) -> dict[str, RunResult]:
        found: dict[str, RunResult] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, result FROM results WHERE key IN ({marks})",
                                    chunk)
            for key, text in rows:
                found[key] = RunResult(**json.loads(text))
        return found

    def put_many(self, items: Iterable[tuple[str, RunResult]]) -> None:
        rows = [(key, json.dumps(result.as_dict())) for key, result in items
                if result.outcome != SANDBOX_ERROR]
        self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?)", rows)
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        self._db.close()
