"""hybridmetric: how much is a piece of generated code worth to the programmer who receives it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hybridmetric")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

from hybridmetric.audit import audit  # noqa: E402
from hybridmetric.io import read_generations, read_study, write_generations  # noqa: E402
from hybridmetric.schema import RecordError  # noqa: E402
from hybridmetric.scoring import score  # noqa: E402

__all__ = [
    "RecordError",
    "audit",
    "__version__",
    "read_generations",
    "read_study",
    "score",
    "write_generations",
]
