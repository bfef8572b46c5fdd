"""Progress of long work (scoring, fitting): a bar on a terminal, a line now and then in a log.

A bar (tqdm) redraws itself with carriage returns, which a log file (CI, ``nohup``, a job
scheduler's output) keeps as one line that grows for the whole run, or loses; where standard
error is no terminal, a run that takes minutes (an ordinal fit: ~12) showed nothing at all.
There it writes a plain line every :data:`LOG_EVERY_S` seconds instead.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm.auto import tqdm

#: Seconds between two lines of progress in a log.
LOG_EVERY_S = 60.0


class LogLines:
    """``fitting: 120/1010 fits (12%), 2:10 so far, about 16:04 left``, written to ``stream``
    every ``every`` seconds of ``clock`` while the work goes on (a tqdm bar's ``update`` and
    ``close``)."""

    def __init__(self, total: int, desc: str, unit: str, initial: int = 0,
                 every: float = LOG_EVERY_S, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.every, self.stream, self.clock = every, stream or sys.stderr, clock
        self.started = self.last = clock()
        self.first = initial

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def _line(self, now: float) -> str:
        spent, done = now - self.started, self.n - self.first
        text = f"{self.desc}: {self.n}/{self.total} {self.unit}s"
        if self.total:
            text += f" ({100 * self.n / self.total:.0f}%)"
        text += f", {tqdm.format_interval(spent)} so far"
        if done > 0 and self.total > self.n:
            text += f", about {tqdm.format_interval(spent / done * (self.total - self.n))} left"
        return text

    def close(self) -> None:
        """(Nothing to clear: each line stands alone.)"""

    def __enter__(self) -> LogLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int, desc: str, unit: str, progress: bool | None,
                 initial: int = 0) -> Any:
    """A tqdm bar where ``progress`` is True, or None on a terminal; :class:`LogLines` where it
    is None and standard error is no terminal; nothing shown where it is False."""
    if progress is None and not sys.stderr.isatty():
        return LogLines(total, desc, unit, initial)
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, disable=progress is False)
