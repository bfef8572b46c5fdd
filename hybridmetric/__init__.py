"""hybridmetric: how much is a piece of generated code worth to the programmer who receives it.

The public functions load on first use (PEP 562): they bring in pandas, which takes most of a
second to import, and the command line handles Ctrl-C only once it runs."""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("hybridmetric")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

#: Each public name and the module that defines it.
_PUBLIC = {
    "RecordError": "hybridmetric.schema",
    "audit": "hybridmetric.audit",
    "read_generations": "hybridmetric.io",
    "read_study": "hybridmetric.io",
    "score": "hybridmetric.scoring",
    "write_generations": "hybridmetric.io",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'hybridmetric' has no attribute {name!r}")
    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
