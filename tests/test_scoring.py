"""Scoring runs: outputs, signatures, and resuming after SIGKILL without losing a row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hybridmetric import read_generations, score, write_generations
from hybridmetric.sandbox import pool
from hybridmetric.scorers import build
from hybridmetric.scorers.codebleu import PARENT_CHECK_S
from hybridmetric.scorers.edit_sim import EditSim
from hybridmetric.scoring import journal_path, read_scored, signature_path

N_ROWS = 60


def make_input(path: Path) -> Path:
    rows = [{"task_id": f"t{i // 3}", "system": f"s{i % 3}", "candidate": "x" * (i + 1),
             "references": ["x" * 10]} for i in range(N_ROWS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hybridmetric.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_score_writes_table_and_signature(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.parquet"
    table = score(data, build(["edit_sim", "exact_match"]), out, progress=False)
    assert list(table.columns[-2:]) == ["score.edit_sim", "score.exact_match"]
    assert table.loc[9, "score.exact_match"] == 1.0
    assert table.loc[4, "score.edit_sim"] == pytest.approx(0.5)
    pd.testing.assert_frame_equal(read_generations(out), table)
    sig = json.loads(signature_path(out).read_text())
    assert sig["n_rows"] == N_ROWS and sig["scorers"]["edit_sim"].startswith("scorer:edit_sim|")
    assert not journal_path(out).exists()


def test_a_bad_chunk_size_or_the_input_as_output_is_refused_before_the_journal(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    with pytest.raises(ValueError, match=r"chunk size \(--chunk-size\) must be at least 1 row"):
        score(data, build(["edit_sim"]), out, chunk_size=0, progress=False)
    assert not journal_path(out).exists()
    before = data.read_bytes()
    with pytest.raises(ValueError, match="is the input"):
        score(data, build(["edit_sim"]), data, progress=False)
    assert data.read_bytes() == before and not journal_path(data).exists()


def test_repeated_rows_are_noted(tmp_path, capsys):
    data = make_input(tmp_path / "g.jsonl")
    rows = data.read_text().splitlines()
    data.write_text("\n".join([*rows, rows[2], rows[5]]) + "\n")
    score(data, build(["edit_sim"]), progress=False)
    assert ("note: 2 row(s) repeat an earlier row's task_id, system, candidate "
            f"({data}, lines {N_ROWS + 1}, {N_ROWS + 2})") in capsys.readouterr().err


def test_rows_of_a_task_that_do_not_share_its_references_or_tests_are_noted(capsys):
    rows = [{"task_id": "t1", "candidate": "a", "references": ["a"], "tests": {"cases": ["1"]}},
            {"task_id": "t1", "candidate": "b", "references": ["b"], "tests": {"cases": ["1"]}},
            {"task_id": "t2", "candidate": "c", "references": ["c"], "tests": {"cases": ["1"]}},
            {"task_id": "t2", "candidate": "d", "references": ["c"], "tests": {"cases": ["2"]}}]
    scored = score(pd.DataFrame(rows), [EditSim()])
    assert scored["score.edit_sim"].tolist() == [1.0, 1.0, 1.0, 0.0]  # each against its own
    err = capsys.readouterr().err
    assert "the rows of task(s) 't1' hold different references; each row is scored" in err
    assert "the rows of task(s) 't2' hold different tests" in err
    score(pd.DataFrame(rows[2:3]), [EditSim()])
    assert "note" not in capsys.readouterr().err
    # rows that lack what the others of their task hold are said to lack it
    lacking = [*rows[2:], {"task_id": "t2", "candidate": "e"}]
    score(pd.DataFrame(lacking), [EditSim()])
    err = capsys.readouterr().err
    assert "the rows of task(s) 't2' hold references and some none" in err
    assert "different references" not in err


def test_a_misnamed_field_and_a_scorer_without_any_value_are_noted(capsys):
    """'reference' for 'references' is carried through unread: the note says so before any row
    is scored, and, after, that each similarity scorer got no value and why; a row without a
    references field (only) gets no such note."""
    rows = [{"task_id": "t1", "candidate": "a", "reference": "a"},
            {"task_id": "t2", "candidate": "b", "reference": "c"}]
    scored = score(pd.DataFrame(rows), build(["edit_sim", "pass_rate"]))
    assert scored["score.edit_sim"].isna().all()
    err = capsys.readouterr().err
    assert ("note: the table's column 'reference' is not a record field (it is carried through "
            "unread); did you mean 'references'?") in err
    assert ("note: edit_sim gave no value on any row (score.edit_sim: all missing): it needs "
            "each row's references, and the table has no references column") in err
    assert ("note: pass_rate gave no value on any row (score.pass_rate, score.pass: all "
            "missing): it needs each row's tests, and the table has no tests column") in err
    rows[0]["references"], rows[1]["references"] = ["a"], None
    scored = score(pd.DataFrame(rows), build(["edit_sim"]))
    assert scored["score.edit_sim"].tolist()[0] == 1.0
    assert "note" not in capsys.readouterr().err  # ('reference' is then its own)
    with pytest.raises(ValueError, match=r"required column is missing .*; did you mean "
                                         r"'Candidate'\? \(rename it 'candidate'\)"):
        score(pd.DataFrame([{"task_id": "t1", "Candidate": "a"}]), build(["edit_sim"]))


def test_existing_score_columns_are_not_overwritten(tmp_path):
    scored = score(make_input(tmp_path / "g.jsonl"), build(["edit_sim"]), progress=False)
    with pytest.raises(ValueError, match="already has score column"):
        score(scored, build(["edit_sim"]), progress=False)


def test_an_output_of_an_unknown_format_is_refused_before_any_row_is_scored(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    with pytest.raises(ValueError, match=r"unknown extension '\.txt'"):
        score(data, build(["edit_sim"]), tmp_path / "s.txt", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.jsonl"]  # no journal left


def test_resume_after_sigkill_equals_uninterrupted_run(tmp_path, plugin_dir):
    data = make_input(tmp_path / "g.jsonl")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_dir), os.getcwd()])}
    log = tmp_path / "scored.log"
    common = ["--scorers", "length_ratio,edit_sim", "--chunk-size", "4", "--no-progress",
              "--set", "length_ratio.delay=0.02", "--set", f"length_ratio.log={log}"]

    reference = tmp_path / "reference.jsonl"
    assert cli("score", str(data), "-o", str(reference), *common, env=env).wait() == 0

    log.unlink()
    out = tmp_path / "s.jsonl"
    journal = journal_path(out)
    process = cli("score", str(data), "-o", str(out), *common, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 4:  # header + 3 chunks
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not out.exists()
    saved = journal.read_text().count("\n") - 1
    assert 3 <= saved < N_ROWS / 4

    # Without --resume the journal is never silently overwritten.
    retry = cli("score", str(data), "-o", str(out), *common, env=env)
    assert retry.wait() == 2 and b"--resume" in retry.stderr.read()

    first_run_rows = log.read_text().count("\n")
    assert cli("score", str(data), "-o", str(out), *common, "--resume", env=env).wait() == 0
    resumed_rows = log.read_text().count("\n") - first_run_rows
    assert resumed_rows == N_ROWS - 4 * saved  # only the missing rows were scored again
    assert out.read_text() == reference.read_text()
    assert not journal.exists()


def test_torn_journal_line_is_rescored(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    reference = score(data, build(["edit_sim"]), progress=False)
    journal = journal_path(out)
    score(data, build(["edit_sim"]), out, chunk_size=8, progress=False)
    out.unlink()
    # Rebuild a journal as a killed run leaves it: header, two chunks, and half a line.
    lines = [json.dumps(json.loads(signature_path(out).read_text()))]
    table = read_generations(tmp_path / "g.jsonl")
    for start in (0, 8):
        rows = list(range(start, start + 8))
        part = build(["edit_sim"])[0].score(table.iloc[rows])
        lines.append(json.dumps({"rows": rows, "scores": {c: part[c].tolist() for c in part}}))
    journal.write_text("\n".join(lines) + '\n{"rows": [16, 17')
    # interrupted again after one more chunk: what it wrote must not join the torn line
    with pytest.raises(KeyboardInterrupt):
        score(data, [_InterruptedAfter(1)], out, chunk_size=8, resume=True, progress=False)
    resumed = score(data, build(["edit_sim"]), out, resume=True, progress=False)
    pd.testing.assert_frame_equal(resumed, reference)


def test_a_journal_whose_header_was_torn_starts_over(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    journal_path(out).write_text('{"input_sha256": "ab')
    with pytest.raises(KeyboardInterrupt):
        score(data, [_InterruptedAfter(1)], out, chunk_size=8, resume=True, progress=False)
    table = score(data, build(["edit_sim"]), out, resume=True, progress=False)
    pd.testing.assert_frame_equal(table, score(data, build(["edit_sim"]), progress=False))


def test_a_damaged_journal_line_is_named(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    score(data, build(["edit_sim"]), out, progress=False)
    journal_path(out).write_text(signature_path(out).read_text().replace("\n", "") + "\n"
                                 + "not json\n")
    with pytest.raises(RuntimeError, match=r"s\.jsonl\.partial\.jsonl, line 2: .*delete"):
        score(data, build(["edit_sim"]), out, resume=True, progress=False)


class _InterruptedAfter(EditSim):
    """edit_sim, interrupted (Ctrl-C) when asked for more than ``chunks`` chunks."""

    def __init__(self, chunks: int):
        super().__init__()
        self.left = chunks

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().score(frame)


class _Sizes(EditSim):
    """edit_sim, noting the rows of each chunk it is given."""

    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.sizes.append(len(frame))
        return super().score(frame)


def test_chunks_start_small_and_double_to_the_chunk_size(tmp_path):
    """A run stopped in its second chunk has kept its first 16 rows, however large the chunk
    size; the chunks double up to it, and the scores are those of one chunk."""
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    whole = score(data, build(["edit_sim"]), chunk_size=N_ROWS, progress=False)
    for chunk_size, sizes in ((256, [16, 32, 12]), (20, [16, 20, 20, 4]), (5, [5] * 12)):
        scorer = _Sizes()
        pd.testing.assert_frame_equal(score(data, [scorer], chunk_size=chunk_size,
                                            progress=False), whole)
        assert scorer.sizes == sizes
    with pytest.raises(KeyboardInterrupt):
        score(data, [_InterruptedAfter(chunks=1)], out, progress=False)
    kept = [json.loads(line) for line in journal_path(out).read_text().splitlines()[1:]]
    assert [row for entry in kept for row in entry["rows"]] == list(range(16))
    scorer = _Sizes()
    pd.testing.assert_frame_equal(score(data, [scorer], out, resume=True, progress=False), whole)
    assert scorer.sizes == [16, 28]  # (the rows left, in chunks that start small again)


def test_resume_refuses_changed_settings(tmp_path):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    header = {"input_sha256": "0" * 64, "scorers": {}}
    journal_path(out).write_text(json.dumps(header) + "\n")
    with pytest.raises(RuntimeError, match="cannot resume, the input changed"):
        score(data, build(["edit_sim"]), out, resume=True, progress=False)
    # the same input, other scorers: what changed is named, not two signatures in full
    journal_path(out).unlink()
    with pytest.raises(KeyboardInterrupt):
        score(data, [_InterruptedAfter(chunks=1), *build(["chrf"])], out, chunk_size=5,
              progress=False)
    with pytest.raises(RuntimeError, match=r"the scorers changed since the interrupted run "
                                           r"\(rouge_l added; chrf gone; edit_sim: level was "
                                           r"char, now token\)"):
        score(data, build(["edit_sim", "rouge_l"], {"edit_sim": {"level": "token"}}), out,
              resume=True, progress=False)


def test_resume_after_a_finished_run_reuses_its_scores(tmp_path, monkeypatch, capsys):
    """--resume where the run had finished (its journal gone): the scores file is the result,
    nothing is scored again; other scorers, or scores changed by hand, are scored anew."""
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    first = score(data, build(["edit_sim", "exact_match"]), out, progress=False)
    written = out.read_bytes()

    def refuse(self, frame):
        raise AssertionError("scored again")

    with monkeypatch.context() as patched:
        patched.setattr(EditSim, "score", refuse)
        again = score(data, build(["edit_sim", "exact_match"]), out, resume=True,
                      progress=False)
    pd.testing.assert_frame_equal(again, first)
    assert out.read_bytes() == written
    assert "holds these rows scored by these scorers already" in capsys.readouterr().err
    token = score(data, build(["edit_sim"], {"edit_sim": {"level": "token"}}), out, resume=True,
                  progress=False)  # (another setting: scored, and the file rewritten)
    assert "score.exact_match" not in token.columns and out.read_bytes() != written
    assert ("--resume, but no interrupted run of these rows and scorers is journaled for "
            f"{out} (s.jsonl.partial.jsonl is absent): scoring every row"
            ) in capsys.readouterr().err
    score(data, build(["edit_sim"]), out, progress=False)
    out.write_text(out.read_text().replace('"score.edit_sim": 0.1', '"score.edit_sim": 0.9', 1))
    again = score(data, build(["edit_sim"]), out, resume=True, progress=False)
    pd.testing.assert_frame_equal(again, first.drop(columns="score.exact_match"))
    assert "cannot be reused" in capsys.readouterr().err


class _WithDetails(EditSim):
    """edit_sim plus a per-row detail column of JSON values."""

    @property
    def detail_columns(self) -> list[str]:
        return [f"outcomes.{self.alias}"]

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        scores = super().score(frame)
        scores[self.detail_columns[0]] = [[{"outcome": "passed", "n": len(c)}]
                                          for c in frame["candidate"]]
        return scores


@pytest.mark.parametrize("extension", [".jsonl", ".csv", ".parquet"])
def test_detail_columns_survive_journal_and_formats(tmp_path, extension):
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / f"s{extension}"
    table = score(data, [_WithDetails()], out, chunk_size=7, progress=False)
    assert table.loc[3, "outcomes.edit_sim"] == [{"outcome": "passed", "n": 4}]
    pd.testing.assert_frame_equal(read_generations(out), table)


def _as_from_a_terminal() -> None:
    """A command started from a terminal takes Ctrl-C; one a shell starts in the background
    inherits SIGINT ignored (POSIX), as would these commands where the test runner was started
    so: they get the default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_pass_rate_run_ends_at_once_and_keeps_finished_rows(tmp_path, stop, status):
    """SIGTERM, or Ctrl-C to the whole process group, while a program sleeps: the run stops
    now (not when the program's 300 s run out), says where the finished rows are, and leaves
    no program behind; --resume then has the rows that finished."""
    if os.getuid() != 0:
        pytest.skip("the sandbox's own uids need root")
    rows = [{"task_id": f"t{i}", "candidate": "x = 1\n",
             "tests": {"cases": ["assert x == 1\n"]}} for i in range(3)]
    rows.append({"task_id": "sleeper", "candidate": "import time\ntime.sleep(300)\n",
                 "tests": {"cases": ["\n"], "timeout_s": 300}})
    data = tmp_path / "g.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "hybridmetric.cli", "score", str(data), "-o", str(out),
         "--scorers", "pass_rate", "--chunk-size", "1", "--no-progress",
         "--set", "pass_rate.cache=none", "--set", "pass_rate.workers=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=_as_from_a_terminal)
    journal = journal_path(out)
    for _ in range(6000):  # the three quick rows journaled: the sleeper runs
        if journal.exists() and journal.read_text().count("\n") >= 4:  # header + 3 rows
            break
        time.sleep(0.01)
    for _ in range(1000):
        if _sandbox_programs():
            break
        time.sleep(0.01)
    try:
        if stop == signal.SIGINT:  # as a terminal sends it
            os.killpg(process.pid, stop)
        else:
            process.send_signal(stop)
        _, err = process.communicate(timeout=20)  # (not the 300 s, nor a 30 s grace)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert b"finished rows are kept in" in err and b"--resume" in err
    for _ in range(1000):
        if not _sandbox_programs():
            break
        time.sleep(0.01)
    assert _sandbox_programs() == []
    assert journal.read_text().count("\n") == 4


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_command_stopped_while_it_starts_ends_as_at_any_other_time(tmp_path, stop, status):
    """SIGTERM or Ctrl-C while the command line is still importing (numpy is mapped, pandas
    follows: most of a second) ends it with the signal's status and one line, no traceback.
    (Should the imports be over by then, the command waits for its input, a FIFO nobody
    writes, and the signal ends that the same way: no row finished, so no journal is named.)"""
    data = tmp_path / "g.jsonl"
    os.mkfifo(data)
    process = subprocess.Popen(
        [sys.executable, "-m", "hybridmetric.cli", "score", str(data), "-o",
         str(tmp_path / "s.jsonl"), "--scorers", "exact_match", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=_as_from_a_terminal)
    try:
        for _ in range(3000):
            if "numpy" in Path(f"/proc/{process.pid}/maps").read_text():
                break
            time.sleep(0.001)
        os.killpg(process.pid, stop)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert err.decode().strip() == "hybridmetric: interrupted"


def test_ctrl_c_while_codebleu_scores_ends_its_worker_without_a_traceback(tmp_path):
    """Ctrl-C to the command's process group while its CodeBLEU worker scores: the worker,
    in a group of its own, gets none (no traceback of its own on the terminal), and the
    command ends it."""
    code = "def f(x):\n    return [i * 2 for i in range(x) if i %% 3] + [%d]\n"
    rows = [{"task_id": f"t{i}", "candidate": code % i, "references": [code % (i + 1)],
             "language": "python"} for i in range(4000)]
    data = tmp_path / "g.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    process = subprocess.Popen(
        [sys.executable, "-m", "hybridmetric.cli", "score", str(data), "-o",
         str(tmp_path / "s.jsonl"), "--scorers", "codebleu", "--chunk-size", "4000",
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=_as_from_a_terminal)
    workers: list[int] = []
    try:
        for _ in range(6000):  # its worker up and scoring (the request sent)
            workers = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
                       and b"hybridmetric.scorers.codebleu" in _cmdline(int(pid))]
            if workers:
                break
            time.sleep(0.01)
        assert workers
        time.sleep(1.0)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, err
    [line] = err.decode().strip().splitlines()  # (its one line: no traceback)
    assert line.startswith("hybridmetric: interrupted"), err
    # ended by the command as it closes; one it had not yet been handed (a Ctrl-C inside
    # Popen, on a loaded machine) ends itself once it sees its parent gone (PARENT_CHECK_S)
    deadline = time.monotonic() + 3 * PARENT_CHECK_S
    while any(_cmdline(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_cmdline(pid) for pid in workers)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # (gone)
        return b""


def _sandbox_programs() -> list[int]:
    """Processes of the sandbox's uids (programs: between programs only root's run)."""
    uids = range(pool.UID_BASE, pool.UID_BASE + pool.UID_SLOTS)
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid in uids:
                found.append(int(entry))
        except FileNotFoundError:
            continue
    return found


def test_a_score_changed_after_scoring_is_refused(tmp_path):
    """The sidecar signs each row's task, the fields the scorers read and the scores: a score
    changed by hand, a reference or candidate changed after scoring (the scores are no longer
    theirs), or rows swapped, is refused where the file is read; a rating, or a column added
    beside them, is not. So is a sidecar without the hash, or that is not JSON."""
    out = tmp_path / "s.jsonl"
    score(make_input(tmp_path / "g.jsonl"), build(["edit_sim"]), out, progress=False)
    table = read_generations(out)
    write_generations(table.assign(note="added later", rating=4.0), out)
    assert read_scored(out)[0]["note"].eq("added later").all()
    changed = table.copy()
    changed.loc[3, "score.edit_sim"] = 1.0 - changed.loc[3, "score.edit_sim"]
    references = table.copy()
    references["references"] = [["zzz"]] * N_ROWS
    candidate = table.copy()
    candidate.loc[0, "candidate"] += " "
    for edited in (changed, references, candidate, table.iloc[[1, 0, *range(2, N_ROWS)]]):
        write_generations(edited, out)
        with pytest.raises(ValueError, match="not those its sidecar s.jsonl.signature.json signs"):
            read_scored(out)
        # nor does scoring it again with another scorer sign its stale scores anew
        with pytest.raises(ValueError, match="not those its sidecar"):
            score(out, build(["other=edit_sim"]), tmp_path / "again.jsonl", progress=False)
    write_generations(table, out)
    sidecar = signature_path(out)
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({k: v for k, v in meta.items() if k != "rows_sha256"}))
    with pytest.raises(ValueError, match="holds no 'rows_sha256'.*so nothing shows"):
        read_scored(out)
    older = {**{k: v for k, v in meta.items() if k != "rows_sha256"}, "scores_sha256": "00"}
    sidecar.write_text(json.dumps(older))
    with pytest.raises(ValueError, match="written by an older hybridmetric"):
        read_scored(out)
    sidecar.write_text(json.dumps({**meta, "scorers": {"edit_sim": {"x": 1}}}))
    with pytest.raises(ValueError, match=r"a signature is a string \(scorers \['edit_sim'\]"):
        read_scored(out)
    sidecar.write_text('{"scorers": {"edit_sim": "a\tb"')
    with pytest.raises(ValueError, match="s.jsonl.signature.json: not a signature sidecar"):
        read_scored(out)


def test_a_changed_scores_file_is_refused_as_input_before_any_scoring(tmp_path, monkeypatch):
    """Scoring a scores file again (with more scorers) checks its sidecar first: a changed one
    is refused before a row is scored, and leaves no journal behind."""
    scored = tmp_path / "s.jsonl"
    score(make_input(tmp_path / "g.jsonl"), build(["edit_sim"]), scored, progress=False)
    table = read_generations(scored)
    table.loc[3, "score.edit_sim"] = 1.0 - table.loc[3, "score.edit_sim"]
    write_generations(table, scored)
    calls = []
    monkeypatch.setattr(EditSim, "score", lambda self, frame: calls.append(len(frame)))
    out = tmp_path / "again.jsonl"
    with pytest.raises(ValueError, match="not those its sidecar s.jsonl.signature.json signs"):
        score(scored, build(["other=edit_sim"]), out, progress=False)
    assert calls == [] and not journal_path(out).exists()


def test_a_run_that_fails_before_a_row_finishes_leaves_no_journal(tmp_path, monkeypatch):
    """A scorer that fails on the first chunk (a setting only its model can check, say) ends a
    run with nothing to resume: its journal goes, and the next run starts without --resume. A
    failure after a chunk finished keeps the journal for --resume."""
    data = make_input(tmp_path / "g.jsonl")
    out = tmp_path / "s.jsonl"
    original = EditSim.score
    chunks = []

    def fails_on(chunk: int):
        def scored(self, frame):
            chunks.append(len(frame))
            if len(chunks) == chunk:
                raise ValueError("the layer is out of range")
            return original(self, frame)
        return scored

    monkeypatch.setattr(EditSim, "score", fails_on(1))
    with pytest.raises(ValueError, match="out of range"):
        score(data, build(["edit_sim"]), out, chunk_size=20, progress=False)
    assert not journal_path(out).exists()
    chunks.clear()
    monkeypatch.setattr(EditSim, "score", fails_on(2))
    with pytest.raises(ValueError, match="out of range"):
        score(data, build(["edit_sim"]), out, chunk_size=20, progress=False)
    assert journal_path(out).exists()
    with pytest.raises(RuntimeError, match="holds an interrupted run"):
        score(data, build(["edit_sim"]), out, chunk_size=20, progress=False)
    monkeypatch.setattr(EditSim, "score", original)
    resumed = score(data, build(["edit_sim"]), out, chunk_size=20, resume=True, progress=False)
    pd.testing.assert_frame_equal(resumed, score(data, build(["edit_sim"]), progress=False))


def test_an_output_that_cannot_be_written_is_named(tmp_path):
    """The error names the output the user gave, and the journal beside it that failed first."""
    data = make_input(tmp_path / "g.jsonl")
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=r"cannot write the output .*file/s.jsonl: its journal "
                                      r".*s.jsonl.partial.jsonl cannot be written \(.+\)"):
        score(data, build(["edit_sim"]), tmp_path / "file" / "s.jsonl", progress=False)
