"""The least a fork-per-program Python harness can spend on a program on this machine.

A fork server with nothing else: no isolation, no limits, no verdict, no error text, no files.
Each program runs in a forked child (compile, run, exit) and the server waits for it. Started
by ``bench_sandbox.py`` as ``python -I -S fork_floor.py`` in a scratch folder, one process per
worker. It reads a JSON list of program texts on stdin (programs that finished in both harnesses;
an alarm still ends any that runs over 10 s) and, once they have run, writes on stdout what they
cost, as JSON: the CPU seconds and page faults of its own process over the loop and of its
reaped children (which the benchmark sets beside the sandbox's own parts).
"""

import ast  # noqa: F401 - compile() then finds its AST types built, as in any warm fork server
import gc
import json
import os
import resource
import signal
import sys
import typing  # noqa: F401 - most HumanEval programs import it


def main() -> None:
    sources = json.load(sys.stdin)
    null = os.open(os.devnull, os.O_RDWR)
    gc.collect()
    gc.freeze()
    before = usage()
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
    after = usage()
    json.dump({part: [a - b for a, b in zip(after[part], before[part], strict=True)]
               for part in after}, sys.stdout)


def usage() -> dict[str, list[float]]:
    """CPU seconds and page faults so far of this process (``server``) and of its reaped
    children (``programs``)."""
    parts = {}
    for part, who in (("server", resource.RUSAGE_SELF), ("programs", resource.RUSAGE_CHILDREN)):
        used = resource.getrusage(who)
        parts[part] = [used.ru_utime + used.ru_stime, used.ru_minflt]
    return parts


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):  # (its input comes on stdin, from bench_sandbox.py)
        print(__doc__)
    else:
        main()
