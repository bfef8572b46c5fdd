"""Programs sent to a worker in batches: the job queue the pool's threads share, the worker's
replies read one at a time where several come together, a batch a worker gives back after a
slow program, and where the verdict falls when a worker dies in the middle of one."""

from __future__ import annotations

import marshal
import os
import threading
import time

import pytest

from hybridmetric.sandbox import (
    FAILED,
    PASSED,
    SANDBOX_ERROR,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    Sandbox,
    pool,
)
from hybridmetric.sandbox.launcher import (
    LauncherError,
    MessageReader,
    NoAnswerInTime,
    write_message,
)

LIMITS = Limits(timeout_s=5.0)
PASS = Program("python", "assert 1 + 1 == 2\n", LIMITS)
FAIL = Program("python", "assert 1 + 1 == 3\n", LIMITS)
BROKEN = Program("python", "def f(:\n", LIMITS)
SLOW = Program("python", "import time\ntime.sleep(0.3)\nassert True\n", LIMITS)


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers (started after it) that never give back a batch: each of these tests' programs
    takes milliseconds, but on a busy machine one might take longer than BATCH_PATIENCE_S."""
    monkeypatch.setattr(pool, "BATCH_PATIENCE_S", 600.0)


def _jobs(count: int, workers: int = 2) -> pool._Jobs:
    return pool._Jobs(((str(i), PASS) for i in range(count)), workers)


def test_a_batch_is_full_while_the_queue_is_long_and_shrinks_as_it_runs_low() -> None:
    """BATCH while four batches a worker remain; then a quarter of each worker's share; one
    at the end."""
    jobs = _jobs(100)
    sizes = []
    while batch := jobs.take():
        sizes.append(len(batch))
        jobs.done(batch, len(batch))
    # 100, 92, 84, 76, 68 left: a quarter of each worker's share is 8 or more
    assert sizes[:5] == [8, 8, 8, 8, 8]
    # 60 left: 60 // 8 = 7; then 53 // 8, 47 // 8, ... down to 15 left, where it is 1
    assert sizes[5:] == [7, 6, 5, 5, 4, 4, 3, 3, 2, 2, 2, 2] + [1] * 15


def test_what_a_worker_left_unrun_goes_back_to_the_front_in_order() -> None:
    jobs = _jobs(40, workers=1)
    batch = jobs.take()
    assert [key for key, _ in batch] == ["0", "1", "2", "3", "4", "5", "6", "7"]
    jobs.done(batch, 3)
    assert [key for key, _ in jobs.take()][:5] == ["3", "4", "5", "6", "7"]


def test_nothing_goes_back_once_the_run_stopped() -> None:
    jobs = _jobs(1)
    batch = jobs.take()
    jobs.stop()
    jobs.done(batch, 0)
    assert jobs.take() == []


def test_a_thread_with_nothing_to_take_waits_for_what_another_gives_back() -> None:
    """The queue is empty, but another thread holds programs: take waits, and gets them when
    they come back; once every program is done with, it gets nothing and returns."""
    jobs = _jobs(2, workers=1)
    held = jobs.take() + jobs.take()
    taken: list[list[tuple[str, Program]]] = []

    def wait_and_take() -> None:
        taken.append(jobs.take())
        jobs.done(taken[-1], len(taken[-1]))
        taken.append(jobs.take())

    waiter = threading.Thread(target=wait_and_take, daemon=True)
    waiter.start()
    time.sleep(0.2)
    assert not taken and waiter.is_alive()  # (waiting: the two may come back)
    jobs.done(held[:1], 1)
    jobs.done(held[1:], 0)  # the second comes back
    waiter.join(10)
    assert not waiter.is_alive()
    assert [[key for key, _ in batch] for batch in taken] == [["1"], []]


def test_stopping_the_run_wakes_a_waiting_thread() -> None:
    jobs = _jobs(1)
    jobs.take()
    taken: list[list[tuple[str, Program]]] = []
    waiter = threading.Thread(target=lambda: taken.append(jobs.take()), daemon=True)
    waiter.start()
    time.sleep(0.1)
    jobs.stop()
    waiter.join(10)
    assert taken == [[]]


def test_messages_that_come_together_are_read_one_at_a_time() -> None:
    """Two replies in one read, and one split over three writes, each read whole and in order;
    the end of the pipe is an error, and so is a message that does not come in time."""
    read, write = os.pipe()
    try:
        reader = MessageReader(read)
        write_message(write, {"a": 1})
        write_message(write, ["b", 2])
        assert reader.read(5) == {"a": 1}
        assert reader.read(5) == ["b", 2]
        big = "x" * 300_000
        done = threading.Thread(target=write_message, args=(write, big))
        done.start()
        assert reader.read(5) == big
        done.join()
        with pytest.raises(NoAnswerInTime):
            reader.read(0.1)
        data = marshal.dumps([1, "two"])
        os.write(write, len(data).to_bytes(8, "little") + data[:3])  # (the rest comes later)
        with pytest.raises(NoAnswerInTime):
            reader.read(0.1)
        os.write(write, data[3:])
        assert reader.read(5) == [1, "two"]  # (what came before the timeout was kept)
    finally:
        os.close(write)
    with pytest.raises(LauncherError):
        reader.read(5)
    os.close(read)


def test_a_batch_runs_each_program_and_compiles_it_as_alone(patient: None) -> None:
    """Each program's verdict from a batch is the one it gets alone, syntax errors included
    (those the worker's compile finds: no child)."""
    programs = [PASS, FAIL, BROKEN, PASS, FAIL]
    with Sandbox(workers=1) as box:
        batched = [result.outcome for result in box._workers[0].run(programs, [])]
        alone = [next(box._workers[0].run([program], [])).outcome for program in programs]
    assert batched == alone == [PASSED, FAILED, SYNTAX_ERROR, PASSED, FAILED]


def test_a_worker_gives_back_what_waits_behind_a_slow_program() -> None:
    """After a program slower than BATCH_PATIENCE_S the worker stops the batch, so that
    another worker may run the rest; the pool puts them back in the queue, and every program
    gets its verdict."""
    assert pool.BATCH_PATIENCE_S < 0.3
    with Sandbox(workers=1) as box:
        first = list(box._workers[0].run([SLOW, PASS, FAIL], []))
        assert [result.outcome for result in first] == [PASSED]  # the rest given back
        many = [SLOW, *(Program("python", f"assert {i} == {i % 3}\n", LIMITS)
                        for i in range(40))]
        results = box.run(many)
    assert [result.outcome for result in results] == [PASSED] + [
        PASSED if i == i % 3 else FAILED for i in range(40)]


def test_a_worker_that_dies_in_a_batch_costs_only_the_program_it_ran(patient: None) -> None:
    """Killed while the first of three programs runs, the worker takes that verdict with it
    (a sandbox error); a fresh worker runs the other two."""
    sleeper = Program("python", "import time\ntime.sleep(30)\n", Limits(timeout_s=60.0))
    with Sandbox(workers=1) as box:
        pool_worker = box._workers[0]
        assert pool_worker.process is not None
        doomed = pool_worker.process

        def kill_once_it_runs() -> None:
            time.sleep(1.0)  # (its compile takes milliseconds; the sleep, 30 s)
            doomed.kill()

        killer = threading.Thread(target=kill_once_it_runs)
        killer.start()
        results = list(pool_worker.run([sleeper, PASS, FAIL], []))
        killer.join()
        assert [result.outcome for result in results] == [SANDBOX_ERROR, PASSED, FAILED]
        assert "worker died" in results[0].error
        assert pool_worker.process is not doomed


def test_a_worker_that_dies_before_it_compiled_a_batch_blames_none_of_them(
        patient: None) -> None:
    """A worker gone before it said it compiled the batch may have died compiling any of its
    programs: each runs again on its own, and those that did not kill it get their verdicts."""
    with Sandbox(workers=1) as box:
        pool_worker = box._workers[0]
        assert pool_worker.process is not None
        pool_worker.process.kill()
        pool_worker.process.wait()
        results = list(pool_worker.run([PASS, FAIL, PASS], []))
    assert [result.outcome for result in results] == [PASSED, FAILED, PASSED]


def test_a_timeout_in_a_batch_is_a_timeout() -> None:
    spinner = Program("python", "while True:\n    pass\n", Limits(timeout_s=0.5))
    with Sandbox(workers=1) as box:
        results = list(box._workers[0].run([spinner, PASS], []))
    assert [result.outcome for result in results] == [TIMEOUT]  # (slow: the rest given back)


def test_a_batch_left_unread_costs_the_worker_not_the_next_verdicts(patient: None) -> None:
    """A caller that stops reading a batch's verdicts (Ctrl-C, or a progress callback that
    raised) has the worker killed: its replies to the rest would be read as the next run's."""
    with Sandbox(workers=1) as box:
        pool_worker = box._workers[0]
        results = pool_worker.run([FAIL, PASS, PASS], [])
        assert next(results).outcome == FAILED
        results.close()
        assert [result.outcome for result in pool_worker.run([FAIL], [])] == [FAILED]
        assert [result.outcome for result in pool_worker.run([PASS, FAIL], [])] == [
            PASSED, FAILED]


def test_a_worker_that_does_not_say_it_compiled_the_batch_is_replaced(
        patient: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything but the word that it compiled the batch (here the pool expects another word)
    and the worker is replaced; each program then runs alone, and gets its own verdict."""
    monkeypatch.setattr(pool, "BATCH_COMPILED", "another word")
    with Sandbox(workers=1) as box:
        pool_worker = box._workers[0]
        assert pool_worker.process is not None
        before = pool_worker.process.pid
        results = list(pool_worker.run([PASS, FAIL, BROKEN], []))
        assert pool_worker.process.pid != before
    assert [result.outcome for result in results] == [PASSED, FAILED, SYNTAX_ERROR]


def test_a_worker_interrupted_after_its_last_verdict_is_replaced_before_the_next_run() -> None:
    """Ctrl-C may kill a worker just after it gave its last verdict (the caller still saving
    it): the next run starts a fresh worker, and its program is not reported interrupted."""
    with Sandbox(workers=1) as box:
        pool_worker = box._workers[0]
        results = pool_worker.run([PASS], [])
        assert next(results).outcome == PASSED
        pool_worker.interrupt()  # (busy: the batch is not done with)
        assert list(results) == []
        assert [result.outcome for result in pool_worker.run([FAIL], [])] == [FAILED]
