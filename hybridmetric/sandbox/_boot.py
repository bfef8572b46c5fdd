"""Start a sandbox worker without importing ``hybridmetric/__init__.py``.

The package's top level imports pandas; a fork server that carries pandas pays ~10 ms more per
fork on a small VM. Run as a script, this registers ``hybridmetric`` as a bare namespace (its
path, not its ``__init__``) and starts the worker; ``preload`` decides what else is imported.
"""

import sys
import types
from pathlib import Path

if __name__ == "__main__":
    package = types.ModuleType("hybridmetric")
    package.__path__ = [str(Path(__file__).resolve().parents[1])]
    sys.modules["hybridmetric"] = package
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # not the sandbox folder itself
    from hybridmetric.sandbox.worker import main

    main()
