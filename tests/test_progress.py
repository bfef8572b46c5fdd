"""Progress in a log: a line now and then, with what is done and about how long is left."""

from __future__ import annotations

import io

import pytest
from tqdm.auto import tqdm

from hybridmetric.progress import LogLines, progress_bar


def test_a_log_gets_a_line_a_minute_with_what_is_left() -> None:
    """An ordinal fit of ~12 minutes showed nothing where standard error was a log."""
    now = [100.0]
    stream = io.StringIO()
    with LogLines(1010, "fitting", "fit", stream=stream, clock=lambda: now[0]) as lines:
        for _ in range(100):  # 100 fits in 59 s: no line yet
            now[0] += 0.59
            lines.update()
        assert stream.getvalue() == ""
        now[0] += 1.0  # 60 s: one line; then the next only 60 s on
        lines.update(20)
        lines.update()
    assert stream.getvalue() == ("fitting: 120/1010 fits (12%), 01:00 so far, about 07:25 "
                                 "left\n")  # (890 more at 60 s a 120: 445 s)


def test_a_resumed_run_counts_its_pace_from_where_it_began() -> None:
    now = [0.0]
    stream = io.StringIO()
    lines = LogLines(400, "scoring", "row", initial=300, every=10, stream=stream,
                     clock=lambda: now[0])
    now[0] = 10.0
    lines.update(50)  # 50 rows in 10 s; 50 left: 10 s
    assert stream.getvalue() == "scoring: 350/400 rows (88%), 00:10 so far, about 00:10 left\n"


@pytest.mark.parametrize(("progress", "terminal", "kind"), [
    (None, False, LogLines), (None, True, tqdm), (True, False, tqdm), (False, False, tqdm)])
def test_a_bar_on_a_terminal_lines_in_a_log_nothing_when_told(
        progress: bool | None, terminal: bool, kind: type,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: terminal)
    shown = progress_bar(10, "scoring", "row", progress)
    assert isinstance(shown, kind)
    if isinstance(shown, tqdm):
        assert shown.disable is (progress is False)
    shown.close()
