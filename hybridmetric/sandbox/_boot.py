"""Start a sandbox worker without importing ``hybridmetric/__init__.py``.

The package's top level imports pandas, and the sandbox's imports numpy (pass@k) and sqlite3 (the
cache); a fork server that carries them copies more page tables on every fork and every program's
exit (pandas: ~10 ms more per fork on a small VM; numpy: ~0.3 ms). Run as a script, this
registers ``hybridmetric`` and ``hybridmetric.sandbox`` as bare namespaces (their paths, not their
``__init__``) and starts the worker; ``preload`` decides what else is imported.
"""

import sys
import types
from pathlib import Path

if __name__ == "__main__":
    for name, folder in (("hybridmetric", Path(__file__).resolve().parents[1]),
                         ("hybridmetric.sandbox", Path(__file__).resolve().parent)):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # not the sandbox folder itself
    from hybridmetric.sandbox.worker import main

    main()
