"""Start a sandbox worker (``_boot.py CONFIG CODE``) or its fork server (``_boot.py serve``)
without importing ``hybridmetric/__init__.py``; and the code they import.

The package's top level imports pandas, and the sandbox's imports numpy (pass@k) and sqlite3 (the
cache); a process that forks programs and carries them copies more page tables on every fork and
every program's exit (pandas: ~10 ms more per fork on a small VM; numpy: ~0.3 ms). Run as a
script, this registers ``hybridmetric`` and ``hybridmetric.sandbox`` as bare namespaces (their
paths, not their ``__init__``) and imports the one module it starts. The fork server imports
``launcher`` as a module, not as the script: what compiling a script allocates stays in its
heap (~1.7 MB more resident memory, which every fork copies the page tables of), where a
module's is given back.

The sandbox's own modules come compiled (:func:`compiled_modules`), from a memory file that the
pool passes on descriptor CODE (the server gets it on 3): no worker or server compiles them at
its start.
"""

import marshal
import os
import sys
import types
from importlib.machinery import ModuleSpec, SourceFileLoader

#: The sandbox's modules that a worker imports (its fork server: ``launcher`` alone).
WORKER_MODULES = ("limits", "launcher", "compiling", "cgroup", "isolation", "languages", "javac",
                  "leftovers", "worker")
PACKAGE = "hybridmetric.sandbox"
#: (the sources' paths, sizes and times, the memory file made from them)
_made: tuple[tuple[tuple[str, int, int], ...], int] | None = None


def compiled_modules() -> int:
    """A sealed memory file holding the code of :data:`WORKER_MODULES` (``{name: (path,
    code)}``, marshal), compiled once in this process (from the bytecode cache where there is
    one), and again only when a source changed: a descriptor that stays open, for workers to
    inherit. Without it, each worker and fork server would compile them at its start wherever
    no bytecode cache can be written (PYTHONDONTWRITEBYTECODE, a read-only install; and, in
    an editable install, the modules the caller never imports): ~50 ms of every worker's."""
    import fcntl  # here: the server and the worker never call this

    global _made
    here = os.path.dirname(os.path.realpath(__file__))
    paths = [os.path.join(here, f"{name}.py") for name in WORKER_MODULES]
    stamps = tuple((path, status.st_size, status.st_mtime_ns)
                   for path, status in zip(paths, map(os.stat, paths), strict=True))
    if _made is not None and _made[0] == stamps:
        return _made[1]
    code = {}
    for name, path in zip(WORKER_MODULES, paths, strict=True):
        fullname = f"{PACKAGE}.{name}"
        code[fullname] = (path, marshal.dumps(SourceFileLoader(fullname, path).get_code(fullname)))
    fd = os.memfd_create("hybridmetric-sandbox-code", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(marshal.dumps(code))
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    if _made is not None:  # (workers started from it hold their own copy)
        os.close(_made[1])
    _made = stamps, fd
    return fd


class Compiled:
    """Imports the modules whose code the memory file ``fd`` holds (:func:`compiled_modules`)
    as from their files (``__file__``, tracebacks)."""

    def __init__(self, fd: int):
        self.modules = marshal.loads(os.pread(fd, os.fstat(fd).st_size, 0))

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name not in self.modules:
            return None
        spec = ModuleSpec(name, self, origin=self.modules[name][0])
        spec.has_location = True
        return spec

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        exec(marshal.loads(self.modules[module.__name__][1]), module.__dict__)


if __name__ == "__main__":
    here = os.path.dirname(os.path.realpath(__file__))
    for name, folder in (("hybridmetric", os.path.dirname(here)), (PACKAGE, here)):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        sys.modules[name] = package
    serving = sys.argv[1:] == ["serve"]
    compiled = Compiled(3 if serving else int(sys.argv[2]))
    sys.meta_path.insert(0, compiled)
    if serving:
        os.close(3)
        from hybridmetric.sandbox.launcher import serve as start
    else:
        # Not the sandbox folder (the script's), nor anything else: the worker's import path,
        # which its fork server and programs take, is the interpreter's own, as ``python
        # program.py`` has it (the program's folder comes first there).
        del sys.path[0]
        from hybridmetric.sandbox.worker import main as start
    sys.meta_path.remove(compiled)
    compiled.modules.clear()  # (the loader of each module: its code would stay in the heap)
    if serving:
        for name in (f"{PACKAGE}.launcher", PACKAGE, "hybridmetric"):
            del sys.modules[name]  # a program that imports them finds them as python would
    start()
