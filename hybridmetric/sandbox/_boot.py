"""Start a sandbox worker (``_boot.py CONFIG``) or its fork server (``_boot.py serve``) without
importing ``hybridmetric/__init__.py``.

The package's top level imports pandas, and the sandbox's imports numpy (pass@k) and sqlite3 (the
cache); a process that forks programs and carries them copies more page tables on every fork and
every program's exit (pandas: ~10 ms more per fork on a small VM; numpy: ~0.3 ms). Run as a
script, this registers ``hybridmetric`` and ``hybridmetric.sandbox`` as bare namespaces (their
paths, not their ``__init__``) and imports the one module it starts. The fork server imports
``launcher`` as a module, not as the script: what compiling a script allocates stays in its
heap (~1.7 MB more resident memory, which every fork copies the page tables of), where a
module's is given back.
"""

import os
import sys
import types

if __name__ == "__main__":
    here = os.path.dirname(os.path.realpath(__file__))
    for name, folder in (("hybridmetric", os.path.dirname(here)), ("hybridmetric.sandbox", here)):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        sys.modules[name] = package
    if sys.argv[1:] == ["serve"]:
        from hybridmetric.sandbox.launcher import serve

        for name in ("hybridmetric.sandbox.launcher", "hybridmetric.sandbox", "hybridmetric"):
            del sys.modules[name]  # a program that imports them finds them as python would
        serve()
    else:
        sys.path[0] = os.path.dirname(os.path.dirname(here))  # not the sandbox folder itself
        from hybridmetric.sandbox.worker import main

        main()
