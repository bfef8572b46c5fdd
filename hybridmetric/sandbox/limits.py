"""Resource limits, outcomes and the result of one sandboxed program."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

PASSED = "passed"
FAILED = "failed"  # an assertion or another exception, or the program stopped before the end
TIMEOUT = "timeout"
MEMORY = "memory"
CRASH = "crash"  # killed by a signal
SYNTAX_ERROR = "syntax_error"  # the program does not parse or compile
SANDBOX_ERROR = "sandbox_error"  # the sandbox itself failed; says nothing about the program
OUTCOMES = (PASSED, FAILED, TIMEOUT, MEMORY, CRASH, SYNTAX_ERROR, SANDBOX_ERROR)

#: Bytes of a program's stdout/stderr kept in a result.
ERROR_CAP = 2000
#: The longest a timeout may be, in seconds (a day): the system's clocks and waits take no
#: more than some bound (1e10 s overflowed one), and no test needs longer.
MAX_TIMEOUT_S = 86400.0


@dataclass(frozen=True)
class Limits:
    """What one program may use. Every limit enters the signature and the cache key."""

    timeout_s: float = 10.0  # wall clock, per program; CPU seconds get the same budget plus 1
    # the memory cgroup's limit on the process tree, where there is one, and RLIMIT_DATA (heap,
    # private mappings): this, or under a cgroup this + 1 GiB (Python) or none (C++); without
    # a cgroup, Python and C++ also get RLIMIT_AS this + 1 GiB (shared memory)
    memory_mb: int = 1024
    file_mb: int = 64  # RLIMIT_FSIZE: largest file it may write, stdout and stderr included
    open_files: int = 256  # RLIMIT_NOFILE
    processes: int = 256  # RLIMIT_NPROC for the sandbox uid (threads count: the JVM needs ~30)
    compile_timeout_s: float = 60.0  # g++ / javac, per program

    def __post_init__(self) -> None:
        """Check each limit, and give it its field's type (a whole ``512.0`` MiB is ``512``), so
        that one limit has one signature and cache key however it was written."""
        for name, value in vars(self).items():  # (each worker makes one a program: kept lean)
            real = type(value) in (int, float) or (isinstance(value, numbers.Real)
                                                   and not isinstance(value, bool))
            if not (real and math.isfinite(value) and value > 0):
                raise ValueError(f"limit '{name}' must be a positive number, got {value!r}")
            if name.endswith("timeout_s") and value > MAX_TIMEOUT_S:
                raise ValueError(f"limit '{name}' must be at most {MAX_TIMEOUT_S:g} seconds (a "
                                 f"day), got {value!r}")
            kind = int if self.__annotations__[name] == "int" else float
            if kind is int and value != int(value):
                raise ValueError(f"limit '{name}' must be a whole number, got {value!r}")
            if type(value) is not kind:
                object.__setattr__(self, name, kind(value))

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # flat fields: dataclasses.asdict's deep copy costs ~30 us


@dataclass(frozen=True)
class RunResult:
    """The verdict on one program (one test case)."""

    outcome: str
    error: str = ""  # capped stderr or the reason for the verdict
    escaped: int = 0  # processes that left the program's process group and had to be hunted

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def cap(text: str, limit: int = ERROR_CAP) -> str:
    """Keep the head and the tail of a long text (the tail holds the exception)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - limit} chars cut]...\n{text[-half:]}"
