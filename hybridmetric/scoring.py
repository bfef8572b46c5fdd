"""Running scorers over a generations table: chunked, resumable, with a progress bar.

With an output path, each finished chunk of rows is appended to a journal
(``<output>.partial.jsonl``) and flushed to disk before the next chunk starts. A run killed at any
point (Ctrl-C, SIGKILL, a crash) loses at most the chunk in flight (chunks start small and grow
to the chunk size); ``resume=True`` reads the journal, checks that the input and the scorers'
signatures are unchanged, and scores only the rows that are missing. The final table is
written atomically and the journal removed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from hybridmetric.io import (
    STUDY_FILE,
    atomic_path,
    file_format,
    frame_hash,
    plain,
    read_generations,
    write_generations,
)
from hybridmetric.progress import progress_bar
from hybridmetric.schema import (
    HYBRID_COLUMN,
    PASS_COLUMN,
    SCORE_PREFIX,
    repeated_rows,
    unread_lookalikes,
    unshared_by_task,
)
from hybridmetric.scorers import Scorer, third_party
from hybridmetric.signature import changed, environment, say
from hybridmetric.signature import parse as parse_signature

JOURNAL_SUFFIX = ".partial.jsonl"
SIGNATURE_SUFFIX = ".signature.json"
DEFAULT_CHUNK = 256
#: The first chunk's rows: chunks double from here to the chunk size, so that a run stopped
#: early keeps what it finished (and the bar moves) even where the chunk size is large.
FIRST_CHUNK = 16


def journal_path(output: str | os.PathLike) -> Path:
    return Path(f"{output}{JOURNAL_SUFFIX}")


def signature_path(output: str | os.PathLike) -> Path:
    return Path(f"{output}{SIGNATURE_SUFFIX}")


def read_sidecar(path: str | os.PathLike) -> dict[str, Any]:
    """The signature sidecar (``<path>.signature.json``) of a scores file: ``scorers`` (each
    scorer's signature), and where a card wrote ``score.hybrid``, ``hybrid`` (the card's
    signature); ``run``'s audited table adds ``hybrid_source`` and ``audit`` (its settings)."""
    sidecar = signature_path(path)
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such scores file")
    if not sidecar.exists():
        raise FileNotFoundError(
            f"{sidecar}: missing; a scores file written by 'hybridmetric score' has this sidecar "
            "with the signature of every scorer (a table cut from one has none: score it with "
            "hybridmetric score to give it its own; pass_rate's verdicts come from its cache)"
        )
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{sidecar}: not a signature sidecar, not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("scorers"), dict):
        raise ValueError(f"{sidecar}: expected an object with a 'scorers' object")
    odd = [alias for alias, signed in meta["scorers"].items() if not isinstance(signed, str)]
    if odd or ("hybrid" in meta and not isinstance(meta["hybrid"], str | None)):
        raise ValueError(f"{sidecar}: a signature is a string (" + (
            f"scorers {odd}" if odd else "'hybrid'") + " is not): the sidecar was edited; "
            "score the table again to sign it")
    return meta


def _carried(source: str | os.PathLike | pd.DataFrame, frame: pd.DataFrame,
             expected: dict[str, Any]) -> dict[str, Any]:
    """What the sidecar of a scores file scored again (with more scorers) hands on: the
    signatures of the score columns it already holds (and of its ``score.hybrid``), from its
    own sidecar, which must be its (:func:`check_sidecar`); nothing for other input."""
    if isinstance(source, pd.DataFrame) or not any(
            c.startswith(SCORE_PREFIX) for c in frame.columns):
        return {}
    path = Path(source) / STUDY_FILE if Path(source).is_dir() else Path(source)
    if not signature_path(path).exists():
        unsigned = [c for c in frame.columns if c.startswith(SCORE_PREFIX)]
        say(f"hybridmetric: note: the input's {unsigned} have no signature (no "
            f"{signature_path(path).name} beside it): fit and audit will refuse them")
        return {}
    meta = read_sidecar(path)
    check_sidecar(frame, meta, path)
    carried: dict[str, Any] = {"scorers": {**meta["scorers"], **expected["scorers"]}}
    carried.update({key: meta[key] for key in ("hybrid", "hybrid_source") if key in meta})
    return carried


T = TypeVar("T")


def _named(scorer: Scorer, what: str, call: Callable[[], T]) -> T:
    """``call()`` (``what`` the scorer does: check, prepare, score), where an error of a
    third-party scorer, or one that no scorer should raise, names the scorer."""
    try:
        return call()
    except (ValueError, RuntimeError, OSError) as exc:
        origin = third_party(type(scorer))
        if origin is None:
            raise
        raise RuntimeError(f"the scorer {scorer.alias} ({origin}), in {what}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - (a defect: named, not a bare traceback)
        origin = third_party(type(scorer)) or type(scorer).__name__
        raise RuntimeError(f"the scorer {scorer.alias} ({origin}) failed in {what}: "
                           f"{exc!r}") from exc


def _scored(scorer: Scorer, part: pd.DataFrame) -> pd.DataFrame:
    """``scorer``'s scores of ``part``, refused (before the journal keeps them) unless they are
    its columns of its rows, in their index: a third-party scorer's defect, named."""
    scored = _named(scorer, "score", lambda: scorer.score(part))
    wanted = scorer.columns + scorer.detail_columns
    problem = None
    if not isinstance(scored, pd.DataFrame):
        problem = f"a {type(scored).__name__}, not a table"
    elif sorted(map(str, scored.columns)) != sorted(wanted):
        problem = f"the columns {list(scored.columns)}, not {wanted}"
    elif len(scored) != len(part):
        problem = f"{len(scored)} row(s) for the {len(part)} given"
    elif not scored.index.equals(part.index):
        problem = (f"an index of its own ({list(scored.index[:3])}...), not the rows' "
                   f"({list(part.index[:3])}...)")
    if problem is not None:
        origin = third_party(type(scorer)) or type(scorer).__name__
        raise RuntimeError(f"the scorer {scorer.alias} ({origin}) returned {problem}: a defect "
                           "of the scorer, to report to its authors")
    return scored[wanted]


#: The sidecar's hash of what a scores file's rows hold that the signatures vouch for (an older
#: sidecar's ``scores_sha256`` covered the tasks, candidates and scores alone).
SCORES_HASH = "rows_sha256"
#: The fields of a row that the scores were made from (the scorers read them), beside its
#: task: changed after scoring, they leave scores that are no longer theirs.
SCORED_FIELDS = ("task_id", "candidate", "references", "tests", "language", "context")


def scores_hash(frame: pd.DataFrame) -> str:
    """The hash of each row's task, the fields the scorers read (:data:`SCORED_FIELDS`) and its
    scores (``score.*``), in order: a scores file whose scores, or whose candidates, references,
    tests, language or context, were changed (or rows swapped) after scoring no longer matches
    its sidecar. (Not the ratings, systems or other columns: no scorer reads them.)"""
    columns = [c for c in SCORED_FIELDS if c in frame.columns]
    return frame_hash(frame[columns + [c for c in frame.columns if c.startswith(SCORE_PREFIX)]])


def write_scores(table: pd.DataFrame, path: str | os.PathLike, meta: dict[str, Any]) -> None:
    """Write a scores file and its sidecar, ``meta`` with the hash of the scores as the file
    gives them back (:func:`scores_hash`)."""
    write_generations(table, path)
    write_sidecar(path, {**meta, SCORES_HASH: scores_hash(read_generations(path))})


def check_sidecar(frame: pd.DataFrame, meta: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse a sidecar that is not the scores file's: one that counts other rows, signs
    other scores (a score changed by hand), signs none of the scorers that made a score
    column, or names no metric card for ``score.hybrid`` (a card's column)."""
    sidecar = signature_path(path)
    rows = meta.get("n_rows")
    if isinstance(rows, int) and rows != len(frame):
        raise ValueError(f"{sidecar}: it signs {rows} rows, but {path} holds {len(frame)}: it is "
                         "another table's sidecar (or the sidecar of the table this one was cut "
                         "from); score this table (hybridmetric score, with the same scorers: "
                         "pass_rate's verdicts come from its cache) to give it its own")
    signed = set(meta["scorers"])
    unsigned = [column for column in frame.columns if column.startswith(SCORE_PREFIX)
                and column != HYBRID_COLUMN and _scorer_of(column) not in signed]
    if unsigned:
        raise ValueError(f"{sidecar}: no scorer signature for {unsigned} (it signs "
                         f"{sorted(signed)}): every score needs the signature of the scorer "
                         "that made it; score them with hybridmetric (a metric of your own: "
                         "as a scorer of the entry-point group hybridmetric.scorers)")
    if HYBRID_COLUMN in frame.columns and not isinstance(meta.get("hybrid"), str):
        raise ValueError(f"{sidecar}: it names no metric card for {HYBRID_COLUMN}, which only a "
                         "card writes (hybridmetric score --card, or run): leave the column out "
                         "of the table, or write it with the card that made it")
    if not isinstance(meta.get(SCORES_HASH), str):
        older = ("written by an older hybridmetric, whose hash covered the scores alone, not "
                 "the references, tests, languages and contexts they were made from"
                 if "scores_sha256" in meta else "so nothing shows that the scores are still "
                 "those it signs")
        raise ValueError(f"{sidecar}: it holds no '{SCORES_HASH}' (the hash of the rows it "
                         f"signs): {older}; score the table again (hybridmetric score, without "
                         "its score columns; pass_rate's verdicts come from its cache) to sign "
                         "what it holds")
    if meta[SCORES_HASH] != scores_hash(frame):
        raise ValueError(f"{path}: its tasks, candidates, references, tests, languages, contexts "
                         f"or scores are not those its sidecar {sidecar.name} signs (changed "
                         "after scoring): score the table again (hybridmetric score, without "
                         "its score columns; pass_rate's verdicts come from its cache) to sign "
                         "what it holds")


def _scorer_of(column: str) -> str:
    """The scorer (or alias) that makes ``column``: ``score.A`` or ``score.A.part`` is A's,
    ``score.pass`` is pass_rate's."""
    return "pass_rate" if column == PASS_COLUMN else column[len(SCORE_PREFIX):].split(".")[0]


def write_sidecar(path: str | os.PathLike, meta: dict[str, Any]) -> None:
    """Write ``meta`` as the signature sidecar of the scores file ``path``, atomically."""
    with atomic_path(signature_path(path)) as temporary:
        temporary.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def read_scored(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A scores file and its sidecar (:func:`read_sidecar`), checked to be its
    (:func:`check_sidecar`)."""
    meta = read_sidecar(path)
    frame = read_generations(path)
    check_sidecar(frame, meta, path)
    return frame, meta


def read_scores(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, str], str | None]:
    """A scores file, the scorer signatures of its sidecar (:func:`read_sidecar`), and the
    signature of the metric card that wrote its ``score.hybrid``, or None."""
    frame, meta = read_scored(path)
    hybrid = meta["hybrid"] if isinstance(meta.get("hybrid"), str) else None
    return frame, dict(meta["scorers"]), hybrid


def run_signature(frame: pd.DataFrame, scorers: Sequence[Scorer]) -> dict[str, Any]:
    """What fixes a scoring run's numbers: the input's hash and every scorer's signature."""
    return {
        "input_sha256": frame_hash(frame),
        "n_rows": len(frame),
        "scorers": {s.alias: s.signature() for s in scorers},
        "environment": environment(),
    }


def _scorers_diff(was: Any, now: dict[str, str]) -> str:
    """What differs between two ``{alias: signature}``: scorers added or gone, and the
    settings a scorer's signature changed."""
    if not isinstance(was, dict) or not all(isinstance(v, str) for v in was.values()):
        return f"was {was!r}, now {now!r}"
    out = [f"{alias} added" for alias in sorted(now.keys() - was.keys())]
    out += [f"{alias} gone" for alias in sorted(was.keys() - now.keys())]
    for alias in sorted(was.keys() & now.keys()):
        fields = changed(was[alias], now[alias])
        if fields:
            a, b = parse_signature(was[alias]), parse_signature(now[alias])
            out.append(f"{alias}: " + ", ".join(f"{k} was {a.get(k)}, now {b.get(k)}"
                                                for k in fields))
        elif was[alias] != now[alias]:  # (the same fields, written otherwise)
            out.append(f"{alias}: was {was[alias]}, now {now[alias]}")
    return "; ".join(out)


def _chunks(rows: list[int], largest: int) -> Iterator[list[int]]:
    """``rows`` in chunks of :data:`FIRST_CHUNK` rows, then twice as many each time, up to
    ``largest``."""
    size, start = min(FIRST_CHUNK, largest), 0
    while start < len(rows):
        yield rows[start:start + size]
        start, size = start + size, min(2 * size, largest)


def _finished(output: str | os.PathLike, expected: dict[str, Any]) -> pd.DataFrame | None:
    """The scores at ``output`` where a finished run wrote them (its journal gone): of these
    rows (``expected``'s input hash), by these scorers (each signature the same), and as its
    sidecar signs them; else None (they are scored again)."""
    try:
        meta = read_sidecar(output)
    except (OSError, ValueError):
        return None
    if not (meta.get("input_sha256") == expected["input_sha256"]
            and meta.get("n_rows") == expected["n_rows"]
            and all(meta["scorers"].get(alias) == signed
                    for alias, signed in expected["scorers"].items())):
        return None
    try:
        table, _ = read_scored(output)
    except (OSError, ValueError) as exc:
        say(f"hybridmetric: note: {output} was scored by these scorers, but cannot be "
            f"reused ({exc}); scoring again")
        return None
    say(f"hybridmetric: note: {output} holds these rows scored by these scorers already (its "
        "sidecar signs them): nothing is left to resume")
    return table


def _read_journal(path: Path, expected: dict[str, Any]) -> tuple[dict[int, dict[str, float]], int]:
    """Rows already scored in an earlier run, keyed by row position, and the size of the
    journal's complete lines. Only the last line can be torn by a kill mid-write: it is left out
    (and cut off before the run goes on, so that what comes next starts a line of its own); a
    journal whose header was torn holds nothing yet."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", "replace").split("\n")[:-1]
    done: dict[int, dict[str, float]] = {}
    for number, text in enumerate(lines, start=1):
        try:
            entry = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"{path}, line {number}: not a journal entry ({exc}); delete "
                               f"{path} to start over") from None
        if number == 1:
            if entry.get("input_sha256") != expected["input_sha256"]:
                raise RuntimeError(f"{path}: cannot resume, the input changed since the "
                                   f"interrupted run; delete {path} to start over")
            if entry.get("scorers") != expected["scorers"]:
                changed = _scorers_diff(entry.get("scorers"), expected["scorers"])
                raise RuntimeError(f"{path}: cannot resume, the scorers changed since the "
                                   f"interrupted run ({changed}); run them as before, or "
                                   f"delete {path} to start over")
            continue
        for i, row in enumerate(entry["rows"]):
            done[row] = {c: math.nan if v[i] is None and c.startswith(SCORE_PREFIX) else v[i]
                         for c, v in entry["scores"].items()}
    return done, end if lines else 0


def _append(handle: Any, rows: Sequence[int], scores: pd.DataFrame) -> None:
    payload = {"rows": [int(r) for r in rows],
               "scores": {c: [plain(v) for v in scores[c]] for c in scores}}
    handle.write(json.dumps(payload) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def unscored(table: pd.DataFrame, scorers: Sequence[Scorer]) -> list[str]:
    """A sentence for each scorer that gave no value on any row of ``table``, with what it
    needs (see ``Scorer.needs``)."""
    notes = []
    for scorer in scorers:
        if len(table) and not table[scorer.columns].notna().to_numpy().any():
            why = ""
            if scorer.needs:
                absent = [field for field in scorer.needs if field not in table.columns]
                why = (f": it needs each row's {' and '.join(scorer.needs)}"
                       + (f", and the table has no {' or '.join(absent)} column" if absent
                          else ""))
            notes.append(f"{scorer.alias} gave no value on any row ({', '.join(scorer.columns)}"
                         f": all missing){why}")
    return notes


class ScoredAlready(ValueError):
    """The input already holds a score column that a scorer of the run would write."""


def score(
    source: str | os.PathLike | pd.DataFrame,
    scorers: Sequence[Scorer],
    output: str | os.PathLike | None = None,
    *,
    resume: bool = False,
    chunk_size: int = DEFAULT_CHUNK,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Score every row of ``source`` with ``scorers`` and return the rows plus score columns.

    With ``output``, the scores table and its signature file (``<output>.signature.json``) are
    written there; the run is journaled so that ``resume=True`` continues an interrupted one.
    ``progress=None`` shows a bar on a terminal, and a line a minute elsewhere (a log).
    """
    if chunk_size < 1:
        raise ValueError(f"the chunk size (--chunk-size) must be at least 1 row, got {chunk_size}")
    if output is not None:
        file_format(output)  # (an extension it cannot write, refused before the scoring)
        if not isinstance(source, pd.DataFrame):
            read_from = Path(source) / STUDY_FILE if Path(source).is_dir() else Path(source)
            if os.path.realpath(output) == os.path.realpath(read_from):
                raise ValueError(f"the output {output} is the input {read_from}: scoring would "
                                 "overwrite the generations; write the scores to another file")
    frame = read_generations(source)
    names = [s.alias for s in scorers]
    if len(set(names)) != len(names):
        raise ValueError(f"a scorer is listed twice: {names}")
    columns = [c for s in scorers for c in s.columns + s.detail_columns]
    clash = [c for c in columns if c in frame.columns]
    if clash:
        raise ScoredAlready(
            f"the input already has score column(s) {clash}; drop them or score into a new file"
        )
    for scorer in scorers:  # a row no scorer can take stops the run before any is scored
        _named(scorer, "check", lambda scorer=scorer: scorer.check(frame))
    for scorer in scorers:  # (what a scorer computes over the whole table, however chunked)
        _named(scorer, "prepare", lambda scorer=scorer: scorer.prepare(frame))
    for note in unread_lookalikes(frame) + unshared_by_task(frame) + repeated_rows(frame):
        say(f"hybridmetric: note: {note}")
    expected = run_signature(frame, scorers)
    # a scores file scored again: its sidecar must still sign it, checked before any scoring
    carried = _carried(source, frame, expected)
    done: dict[int, dict[str, float]] = {}
    journal = journal_path(output) if output is not None else None
    if journal is not None and journal.exists():
        if not resume:
            raise RuntimeError(
                f"{journal} holds an interrupted run; pass --resume to continue it, "
                f"or delete it to start over"
            )
        done, kept = _read_journal(journal, expected)
        os.truncate(journal, kept)  # a torn last line goes (a torn header: all of it)
    elif resume and output is not None:
        finished = _finished(output, expected)
        if finished is not None:
            return finished
        say(f"hybridmetric: note: --resume, but no interrupted run of these rows and scorers "
            f"is journaled for {output} ({journal.name} is absent): scoring every row")
    todo = [i for i in range(len(frame)) if i not in done]
    handle, unfinished = None, False
    if journal is not None:
        try:
            journal.parent.mkdir(parents=True, exist_ok=True)
            if journal.exists() and journal.stat().st_size:
                handle = journal.open("a", encoding="utf-8")
            else:
                handle = journal.open("w", encoding="utf-8")
                handle.write(json.dumps(expected) + "\n")
                handle.flush()
                unfinished = True
        except OSError as exc:
            raise OSError(f"cannot write the output {output}: its journal {journal} cannot "
                          f"be written ({exc.strerror or exc})") from None
    results = {i: row for i, row in done.items()}
    bar = progress_bar(len(frame), "scoring", "row", progress, initial=len(done))
    try:
        for rows in _chunks(todo, chunk_size):
            part = frame.iloc[rows]
            scored = pd.concat([_scored(s, part) for s in scorers], axis=1)
            if handle is not None:
                _append(handle, rows, scored)
                unfinished = False  # it holds finished rows now: kept for --resume
            for position, values in zip(rows, scored.to_dict("records"), strict=True):
                results[position] = values
            bar.update(len(rows))
    except BaseException:
        if unfinished:  # a journal this run began, with no row finished: nothing to resume
            assert journal is not None and handle is not None
            handle.close()
            journal.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
        if handle is not None:
            handle.close()
    table = frame.copy()
    for column in columns:
        table[column] = [results[i][column] for i in range(len(frame))]
    for note in unscored(table, scorers):
        say(f"hybridmetric: note: {note}")
    if output is not None:
        write_scores(table, output, {**expected, **carried})
        journal.unlink()
    return table
