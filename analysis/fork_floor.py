"""The least a fork-per-program Python harness can spend on a program on this machine.

A fork server with nothing else: no isolation, no limits, no verdict, no error text, no files.
Each program runs in a forked child (compile, run, exit) and the server waits for it. Started
by ``bench_sandbox.py`` as ``python -I -S fork_floor.py`` in a scratch folder, one process per
worker. It reads a JSON list of program texts on stdin (programs that finished in both harnesses;
an alarm still ends any that runs over 10 s).
"""

import ast  # noqa: F401 - compile() then finds its AST types built, as in any warm fork server
import gc
import json
import os
import signal
import sys
import typing  # noqa: F401 - most HumanEval programs import it


def main() -> None:
    sources = json.load(sys.stdin)
    null = os.open(os.devnull, os.O_RDWR)
    gc.collect()
    gc.freeze()
    for source in sources:
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                exec(compile(source, "program.py", "exec", dont_inherit=True),
                     {"__name__": "__main__"})
            except BaseException:  # noqa: BLE001 - a failing program, nothing to report
                os._exit(1)
            os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):  # (its input comes on stdin, from bench_sandbox.py)
        print(__doc__)
    else:
        main()
