"""The generation record (see DESIGN.md, "Records") and its validation.

A table of generations has one row per generated program. Validation never drops or repairs a row:
the first bad value stops with a :class:`RecordError` naming the source, the line or row, and the
field.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

REQUIRED = ("task_id", "candidate")
OPTIONAL = ("system", "language", "context", "references", "tests", "rating", "ratings")
#: Columns whose cells are containers; CSV stores them as JSON text.
CONTAINER_COLUMNS = ("references", "tests", "ratings")
DEFAULT_LANGUAGE = "python"
TESTS_KEYS = {"language", "prefix", "suffix", "cases", "timeout_s", "network"}
SCORE_PREFIX = "score."
#: The hybrid metric's column (a metric card's output), and the PASS column (1.0: the unit tests
#: pass, 0.0: they fail, NaN: no tests).
HYBRID_COLUMN = SCORE_PREFIX + "hybrid"
PASS_COLUMN = SCORE_PREFIX + "pass"
#: Per-row details a scorer reports beside its scores (e.g. ``outcomes.pass_rate``); JSON values.
DETAIL_PREFIX = "outcomes."


def is_container(column: str) -> bool:
    """Whether a column holds lists or objects (stored as JSON text in CSV and Parquet)."""
    return column in CONTAINER_COLUMNS or column.startswith(DETAIL_PREFIX)


class RecordError(ValueError):
    """A record that breaks the contract, located by source, line or row, and field."""

    def __init__(self, source: str, where: str, field: str | None, problem: str):
        self.source, self.where, self.field, self.problem = source, where, field, problem
        at = f"{source}: {where}" + (f", field '{field}'" if field else "")
        super().__init__(f"{at}: {problem}")


@dataclass(frozen=True)
class Location:
    """Says where a row came from: ``line 12`` for JSON Lines, ``row 3`` for tables."""

    source: str
    unit: str  # "line" or "row"
    numbers: Sequence[int]

    def of(self, position: int) -> str:
        return f"{self.unit} {self.numbers[position]}"

    def __deepcopy__(self, memo: dict) -> Location:
        """Shared, not copied (never changed): pandas deep-copies a table's ``attrs``, where
        it rides, into every part taken of the table."""
        return self


def renumbered(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` indexed 0, 1, ... (``reset_index``), still naming each row where it came from:
    its :class:`Location` is narrowed to the rows kept, in their order (a part of a table, the
    rows left after others were dropped)."""
    where = frame.attrs.get("location")
    labels = frame.index.tolist()
    out = frame.reset_index(drop=True)
    if isinstance(where, Location):
        if all(isinstance(label, int) and 0 <= label < len(where.numbers) for label in labels):
            out.attrs["location"] = Location(where.source, where.unit,
                                             [where.numbers[label] for label in labels])
        else:
            del out.attrs["location"]
    return out


def row_label(frame: pd.DataFrame, position: int) -> str:
    """Where row ``position`` of ``frame`` (or of a part of a table :func:`validate` checked)
    came from: ``g.jsonl, line 302``; else ``row <its index>``."""
    label = frame.index[position]
    where = frame.attrs.get("location")
    if isinstance(where, Location) and isinstance(label, int) and 0 <= label < len(where.numbers):
        return f"{where.source}, {where.of(label)}"
    return f"row {label}"


def rows_label(frame: pd.DataFrame, positions: Sequence[int], limit: int = 5) -> str:
    """Where rows ``positions`` of ``frame`` came from, the first ``limit`` of them named:
    ``g.jsonl, lines 3, 9 and 4 more``; else ``row 3, row 9 and 4 more``."""
    shown = [int(p) for p in positions[:limit]]
    more = f" and {len(positions) - limit} more" if len(positions) > limit else ""
    where = frame.attrs.get("location")
    labels = [frame.index[p] for p in shown]
    if len(shown) > 1 and isinstance(where, Location) and all(
            isinstance(label, int) and 0 <= label < len(where.numbers) for label in labels):
        numbers = ", ".join(str(where.numbers[label]) for label in labels)
        return f"{where.source}, {where.unit}s {numbers}{more}"
    return ", ".join(row_label(frame, p) for p in shown) + more


def unshared_by_task(frame: pd.DataFrame, columns: Sequence[str] = ("references", "tests")
                     ) -> list[str]:
    """What the rows of one task do not share, where the contract says they do: for each of
    ``columns``, a sentence naming the tasks whose rows hold different values, and one naming
    those some of whose rows lack the value that others hold (none: [])."""
    if "task_id" not in frame.columns:
        return []
    found = []
    tasks = frame["task_id"].astype(str)
    for column in (c for c in columns if c in frame.columns):
        absent = frame[column].map(_missing)
        texts = frame[column].map(lambda value: json.dumps(value, sort_keys=True, default=str))
        counts = texts[~absent].groupby(tasks[~absent], sort=True).nunique()
        lacking = sorted(set(tasks[absent]) & set(tasks[~absent]))
        for differ, says in (
                (counts.index[counts > 1].tolist(),
                 f"hold different {column}; each row is scored against its own"),
                (lacking, f"hold {column} and some none; those rows get no score from the "
                          f"scorers that need {column}")):
            if differ:
                more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
                found.append(f"the rows of task(s) {', '.join(map(repr, differ[:3]))}{more} "
                             f"{says} (a task's rows are meant to share them)")
    return found


def _lookalike(column: object, known: Sequence[str]) -> str | None:
    """The record field of ``known`` whose name ``column`` is close to (``reference`` for
    ``references``, ``Rating`` for ``rating``), if any."""
    close = difflib.get_close_matches(str(column).lower(), known, n=1, cutoff=0.8)
    return close[0] if close else None


def unread_lookalikes(frame: pd.DataFrame) -> list[str]:
    """A sentence for each column that no record field reads but whose name is close to one the
    table lacks: carried through as it is, it would leave that field empty (none: [])."""
    absent = [c for c in REQUIRED + OPTIONAL if c not in frame.columns]
    notes = []
    for column in frame.columns:
        if column in REQUIRED + OPTIONAL or str(column).startswith((SCORE_PREFIX, DETAIL_PREFIX)):
            continue
        field = _lookalike(column, absent)
        if field is not None:
            notes.append(f"the table's column '{column}' is not a record field (it is carried "
                         f"through unread); did you mean '{field}'? Rename it, or no row has "
                         f"a '{field}'")
    return notes


def rows_and_tasks(frame: pd.DataFrame, rows: np.ndarray, limit: int = 5) -> str:
    """``g.jsonl, lines 4, 9 (tasks t0, t3)``: where the rows came from, and their tasks (each
    once)."""
    named = list(dict.fromkeys(str(frame["task_id"].iloc[r]) for r in rows))
    more = ", ..." if len(named) > limit else ""
    return f"{rows_label(frame, rows, limit)} (tasks {', '.join(named[:limit])}{more})"


def missing_rows(frame: pd.DataFrame, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Each of ``columns`` that lacks a value somewhere, with the positions of those rows: no
    finite number (``ratings``: no grade)."""
    found = {}
    for column in columns:
        if column == "ratings":
            bad = np.array([not isinstance(v, Mapping) or not v for v in frame[column]])
        else:  # (an infinite value is no number to fit or apply a weight to either)
            bad = ~np.isfinite(numbers(frame, column))
        if bad.any():
            found[column] = np.flatnonzero(bad)
    return found


def missing_message(frame: pd.DataFrame, missing: dict[str, np.ndarray], fix: str) -> str:
    """The error for :func:`missing_rows`'s finds: each column with how many rows and where,
    then ``fix``."""
    lines, infinite_seen = [], False
    for column, rows in missing.items():
        infinite = 0 if column == "ratings" else int(np.isinf(numbers(frame, column)[rows]).sum())
        infinite_seen |= infinite > 0
        kind = ("missing" if not infinite else "infinite" if infinite == len(rows)
                else "missing or infinite")
        lines.append(f"  {column}: {len(rows)} {kind}, {rows_and_tasks(frame, rows)}")
    header = ("missing or infinite values:" if infinite_seen
              else "missing values (never filled in):")
    return "\n".join([header, *lines, fix])


def score_column(name: str) -> str:
    """A scorer's column by its short name or in full: ``chrf`` or ``score.chrf`` ->
    ``score.chrf``."""
    return name if name.startswith(SCORE_PREFIX) else SCORE_PREFIX + name


def repeated_rows(frame: pd.DataFrame) -> list[str]:
    """A sentence naming the rows that repeat an earlier row's task, system and candidate
    (none: []): each counts again in every correlation, pair and bootstrap, as if it were
    another generation."""
    key = [c for c in ("task_id", "system", "candidate") if c in frame.columns]
    if "task_id" not in key or "candidate" not in key:
        return []
    again = np.flatnonzero(frame[key].astype(str).duplicated().to_numpy())
    if not len(again):
        return []
    return [f"{len(again)} row(s) repeat an earlier row's {', '.join(key)} "
            f"({rows_label(frame, again)}); each counts as another generation in every "
            "statistic: drop them from the generations, and score those, if they are one"]


def check_on_scale(frame: pd.DataFrame, target: str, scale: tuple[float, float]) -> None:
    """ValueError where a rating of ``target`` lies outside ``scale``: how many, and the first
    with its row and task (as ``fit`` and ``audit`` both refuse them; a missing one is no
    rating)."""
    ratings = numbers(frame, target)
    outside = np.flatnonzero((ratings < scale[0]) | (ratings > scale[1]))
    if outside.size:
        first = int(outside[0])
        raise ValueError(
            f"{outside.size} rating(s) of '{target}' lie outside the scale {scale[0]:g} to "
            f"{scale[1]:g}, e.g. {ratings[first]:g} ({row_label(frame, first)}, task "
            f"{frame['task_id'].iloc[first]!r}); fix the ratings or the scale (fit's and "
            "audit's --scale; run's, [rating] min and max in study.toml)")


def check_grades_on_scale(frame: pd.DataFrame, scale: tuple[float, float], target: str) -> None:
    """ValueError naming the first rater's grade (the ``ratings`` column) outside ``scale``,
    where ``target`` is ``rating`` (whose scale the grades share: another target's is its
    own): a row's mean may lie within it while a grade does not, and the grades themselves
    feed the raters' agreement, the human ceiling and the models trained on each grade."""
    if target != "rating" or "ratings" not in frame.columns:
        return
    for row, grades in enumerate(frame["ratings"]):
        if not isinstance(grades, Mapping):
            continue
        for rater, grade in grades.items():
            if _is_number(grade) and not scale[0] <= grade <= scale[1]:
                raise ValueError(
                    f"{row_label(frame, row)}, field 'ratings': rater {rater!r} gave {grade!r}, "
                    f"outside the scale {scale[0]:g} to {scale[1]:g} (task "
                    f"{frame['task_id'].iloc[row]!r}); fix the grade or the scale (fit's and "
                    "audit's --scale; run's, [rating] min and max in study.toml)")


def numbers(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Column ``name`` as floats, NaN where a row holds none; ValueError naming the first row
    that holds anything but a number (text, even ``"4.0"``; a boolean; a list): a rating or a
    score is a number or missing, never guessed from text."""
    if name not in frame.columns:
        raise ValueError(f"the table has no column '{name}'; columns: {list(frame.columns)}")
    column = frame[name]
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        where = frame.attrs.get("location")
        from_csv = isinstance(where, Location) and where.source.lower().endswith(".csv")
        values = [_csv_number(value) if from_csv and isinstance(value, str) else value
                  for value in column]  # (a CSV file holds text: "2.5" is its number)
        bad = [k for k, value in enumerate(values)
               if not (_missing(value) or _is_number(value))]
        if bad:
            more = f" ({len(bad) - 1} more row(s) hold no number either)" if len(bad) > 1 else ""
            raise ValueError(f"column '{name}' is not numeric: {row_label(frame, bad[0])} holds "
                             f"{column.iloc[bad[0]]!r}{more}; give numbers (or leave the value "
                             "out), or choose another column")
        column = pd.Series(values, index=column.index, dtype=object)
    return pd.to_numeric(column).to_numpy(dtype=float, na_value=np.nan)


def select_rows(frame: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """The rows of ``frame`` that meet ``conditions`` (see :func:`rows_meeting`), renumbered
    (:func:`renumbered`: each still names its line)."""
    return renumbered(frame[rows_meeting(frame, conditions)])


def where_conditions(where: str | Sequence[str]) -> list[str]:
    """``where`` (one ``FIELD=VALUE`` condition, or several) in the order a signature records
    them (sorted, each once: their order selects nothing); ValueError for one without
    ``FIELD=``."""
    conditions = [where] if isinstance(where, str) else list(where)
    _by_field(conditions)
    return sorted(set(conditions))


def where_signature(conditions: Sequence[str]) -> str:
    """``conditions`` as a signature's value: JSON (which the signature escapes as any value)."""
    return json.dumps(list(conditions))


def _by_field(conditions: Sequence[str]) -> dict[str, list[str]]:
    wanted: dict[str, list[str]] = {}
    for condition in conditions:
        field, equals, value = condition.partition("=")
        if not equals or not field:
            raise ValueError(f"--where expects FIELD=VALUE (e.g. language=java), got "
                             f"{condition!r}")
        wanted.setdefault(field, []).append(value)
    return wanted


def rows_meeting(frame: pd.DataFrame, conditions: Sequence[str]) -> np.ndarray:
    """Which rows of ``frame`` meet ``conditions``, each ``FIELD=VALUE`` (``language=java``), as
    a boolean mask. A row is kept where, for every field named, its value is one of those given
    for that field: ``language=java`` and ``language=cpp`` keep both languages,
    ``language=java`` and ``system=codex`` codex's Java. Text matches as it is written, but a
    language as the sandbox reads it (``language=js`` matches ``JavaScript``); a
    number matches the same number (``2`` matches ``2.0``; integers exactly); a boolean
    ``true`` or ``false`` in any case; a CSV cell, which holds text, any of these ways (an
    empty one is missing: it matches nothing). ValueError: a condition without ``=``, a field
    the table lacks or whose values are lists or objects, or no row left."""
    keep = np.ones(len(frame), dtype=bool)
    where = frame.attrs.get("location")
    from_csv = isinstance(where, Location) and where.source.lower().endswith(".csv")
    for field, values in _by_field(conditions).items():
        if field not in frame.columns:
            raise ValueError(f"--where {field}=...: the table has no field '{field}'; its fields: "
                             f"{', '.join(map(str, frame.columns))}")
        cells = frame[field].tolist()
        held = next((cell for cell in cells if isinstance(cell, list | dict)), None)
        if held is not None:
            raise ValueError(f"--where {field}=...: '{field}' holds lists or objects (such as "
                             f"{json.dumps(held)[:60]}); --where compares text and numbers")
        if field == "language":
            cells = [language_name(c) if isinstance(c, str) else c for c in cells]
            values = [language_name(v) for v in values]
        keep &= np.array([any(_same(cell, value, from_csv) for value in values)
                          for cell in cells], dtype=bool)
        if not keep.any():
            seen = sorted({str(cell) for cell in cells if not _missing(cell)})
            shown = ", ".join(repr(v) for v in seen[:10]) + (
                f" and {len(seen) - 10} more" if len(seen) > 10 else "")
            raise ValueError(f"no row is left where {where_text(conditions)} (none from "
                             f"'{field}' on); '{field}' holds {shown or 'no value'}")
    return keep


def language_name(name: str) -> str:
    """A language's name as the sandbox reads it: ``JS`` and ``javascript`` are one."""
    from hybridmetric.sandbox.languages import ALIASES  # (here: the sandbox imports this module)

    return ALIASES.get(name.lower(), name.lower())


def where_text(conditions: Sequence[str]) -> str:
    """``conditions`` (see :func:`rows_meeting`) in words: ``language is 'cpp' or 'java', and
    system is 'codex'``."""
    return ", and ".join(f"{field} is {' or '.join(map(repr, values))}"
                         for field, values in _by_field(conditions).items())


def _same(cell: Any, value: str, from_csv: bool) -> bool:
    """Whether a table's ``cell`` is the ``value`` a condition gives (see :func:`rows_meeting`)."""
    if _missing(cell):
        return False
    if isinstance(cell, str):
        if cell == value:
            return True
        if not from_csv:
            return False
        if cell in ("True", "False"):  # (a boolean, as a CSV file holds it)
            return cell.lower() == value.strip().lower()
        cell = int(cell) if _INTEGER.fullmatch(cell) else _csv_number(cell)
    if isinstance(cell, bool | np.bool_):
        return str(bool(cell)).lower() == value.strip().lower()
    if not _is_number(cell):
        return False
    if isinstance(cell, int | np.integer):  # (exactly: beyond 2**53 floats round)
        cell = int(cell)
        if _INTEGER.fullmatch(value):
            return cell == int(value)
    given = _csv_number(value)
    return _is_number(given) and cell == given  # (an int and a float compare exactly)


#: An integer as written (``-12``): one that a condition and a cell compare exactly.
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _csv_number(text: str) -> float | str:
    """A CSV cell's number, or the text itself where it is none (``"n/a"``, ``"nan"``)."""
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:  # (pd.NA: a nullable column's missing value)
        return True
    return isinstance(value, float) and math.isnan(value)


def _not_text(value: str) -> str | None:
    """Why ``value`` cannot be written as UTF-8 (a lone surrogate, which a JSON ``\\ud800``
    escape makes), or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return (f"holds {value[error.start]!r} at character {error.start + 1}, half of a "
                "UTF-16 surrogate pair, which is no character: fix the text")
    return None


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float | np.integer | np.floating)
            and not isinstance(value, bool | np.bool_))


def _finite(value: Any) -> bool:
    """Whether a number is finite as a float (JSON's 400-digit integer is not: it overflows)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_tests(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return f"expected an object with 'cases', got {type(value).__name__}"
    unknown = set(value) - TESTS_KEYS
    if unknown:
        return f"unknown key(s) {sorted(unknown)}; allowed: {sorted(TESTS_KEYS)}"
    cases = value.get("cases")
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        return "'cases' must be a list of strings"
    if not cases:
        return "'cases' is empty: a template needs a test case (a row without tests has none)"
    for key in ("prefix", "suffix", "language"):
        if key in value and not isinstance(value[key], str):
            return f"'{key}' must be a string"
    timeout = value.get("timeout_s")
    if timeout is not None and (not _is_number(timeout) or not _finite(timeout)
                                or timeout <= 0):
        return f"'timeout_s' must be a positive number of seconds, got {timeout!r}"
    if "network" in value and not isinstance(value["network"], bool):
        return "'network' must be true or false"
    return None


def _check_cell(field: str, value: Any) -> str | None:
    """Return a description of what is wrong with one present cell, or None."""
    if field in ("task_id", "candidate", "system", "language", "context"):
        if not isinstance(value, str):
            return f"expected a string, got {type(value).__name__} {value!r:.60}"
        if field in ("task_id", "system") and not value.strip():
            return f"{field} is empty" if not value else f"{field} is only white space"
        return _not_text(value)
    if field == "references":
        if not isinstance(value, list | tuple) or not all(isinstance(r, str) for r in value):
            return f"expected a list of strings, got {type(value).__name__} {value!r:.60}"
        return next(filter(None, map(_not_text, value)), None)
    if field == "tests":
        return _check_tests(value)
    if field == "rating":
        if not _is_number(value) or not _finite(value):
            return f"expected a finite number, got {type(value).__name__} {value!r:.60}"
        return None
    if field == "ratings":
        if not isinstance(value, Mapping):
            return f"expected an object of rater -> number, got {type(value).__name__}"
        for rater, grade in value.items():
            if not isinstance(rater, str):
                return f"a rater is named by a {type(rater).__name__}, not a string: {rater!r}"
            if not rater.strip():
                return f"a rater is named by {'an empty string' if not rater else repr(rater)}"
            if _missing(grade):  # a rater who did not grade it (a Parquet struct's null, NaN)
                continue
            if not _is_number(grade):
                return f"rater {rater!r} has a non-numeric grade {grade!r:.60}"
            if not _finite(grade):
                return f"rater {rater!r} has a grade that is not finite: {grade!r:.60}"
        return None
    if field.startswith(SCORE_PREFIX):
        if not _is_number(value) or (isinstance(value, int | np.integer) and not _finite(value)):
            return f"expected a number, got {type(value).__name__} {value!r:.60}"
        return None
    return None


def checked_ratings(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``ratings`` as the readers give them (:func:`validate`): each cell an
    object of rater (a string) -> finite number, null grades (NaN, ``pd.NA``: a rater who did
    not grade the row) left out; a ValueError naming the first row whose cell they would refuse.
    For tables made in Python, which no reader checked."""
    cells = frame["ratings"].tolist()
    for position, cell in enumerate(cells):
        if not _missing(cell):
            problem = _check_cell("ratings", cell)
            if problem:
                raise ValueError(f"{row_label(frame, position)}, field 'ratings': {problem}")
    frame = frame.copy()
    frame["ratings"] = pd.Series([None if _missing(cell) else
                                  {r: g for r, g in cell.items() if not _missing(g)}
                                  for cell in cells], index=frame.index, dtype=object)
    return frame


def validate(frame: pd.DataFrame, where: Location) -> pd.DataFrame:
    """Check every row of ``frame`` against the record contract and return it normalised.

    Normalisation is limited to representing absent values one way (NaN in numeric columns,
    None elsewhere), filling ``language`` with its documented default, and turning reference
    tuples into lists; nothing is dropped.
    """
    for column in REQUIRED:
        if column not in frame.columns:
            close = [c for c in frame.columns if _lookalike(c, [column])]
            raise RecordError(
                where.source, "header", column,
                f"required column is missing (columns present: {list(frame.columns)})"
                + (f"; did you mean '{close[0]}'? (rename it '{column}')" if close else ""),
            )
    checked = [c for c in frame.columns if c in REQUIRED + OPTIONAL or c.startswith(SCORE_PREFIX)]
    for column in checked:
        values = frame[column].tolist()
        for position, value in enumerate(values):
            if _missing(value):
                if column in REQUIRED:
                    raise RecordError(where.source, where.of(position), column, "value is missing")
                continue
            problem = _check_cell(column, value)
            if problem:
                raise RecordError(where.source, where.of(position), column, problem)
    frame = frame.copy()
    if "language" not in frame.columns:
        frame["language"] = DEFAULT_LANGUAGE
    for column in checked + ["language"]:
        values = frame[column].tolist()
        if column == "rating" or column.startswith(SCORE_PREFIX):
            frame[column] = [math.nan if _missing(v) else float(v) for v in values]
            continue
        if column == "language":
            values = [DEFAULT_LANGUAGE if _missing(v) else v for v in values]
        elif column == "references":
            values = [None if _missing(v) else list(v) for v in values]
        elif column == "ratings":  # a null (or NaN) grade: the rater did not grade the row
            values = [None if _missing(v) else {r: g for r, g in v.items() if not _missing(g)}
                      for v in values]
        else:
            values = [None if _missing(v) else v for v in values]
        frame[column] = pd.Series(values, index=frame.index, dtype=object)
    frame.attrs["location"] = where  # (kept by the parts taken of it: see row_label)
    return frame


def with_rater_mean(frame: pd.DataFrame, target: str) -> tuple[pd.DataFrame, str | None]:
    """A table whose raters' grades were never aggregated (a ``ratings`` column, no ``rating``)
    gets ``rating``, the mean of each row's grades (NaN where a row has none; the same for the
    same grades in any order), and a note that
    says so. A table with both whose ``rating`` is not that mean in some row (a median, a
    consensus, a slip) comes back as it is, with a note that says where: the human ceiling and
    the rater models are the grades'. Any other table, or another ``target``: as it is, None."""
    if target != "rating" or "ratings" not in frame.columns:
        return frame, None
    # (fsum: the exact sum, rounded once, whatever order a row lists its raters in: equal
    # grades give equal means, a tie that the rank correlations count)
    means = [math.fsum(grades.values()) / len(grades) if isinstance(grades, Mapping) and grades
             else math.nan for grades in frame["ratings"]]
    if "rating" not in frame.columns:
        note = ("note: the table has no 'rating' column: the target is each row's mean grade "
                "over its raters ('ratings')")
        return frame.assign(rating=means), note
    given = numbers(frame, "rating")
    apart = [row for row, (rating, mean) in enumerate(zip(given, means, strict=True))
             if not (math.isnan(rating) or math.isnan(mean)
                     or math.isclose(rating, mean, rel_tol=1e-9, abs_tol=1e-9))]
    if not apart:
        return frame, None
    first = apart[0]
    return frame, (f"note: 'rating' is not the mean of the raters' grades ('ratings') in "
                   f"{len(apart)} of {len(frame)} rows, e.g. {row_label(frame, first)}: rating "
                   f"{given[first]:g}, mean grade {means[first]:g}; the human ceiling, and the "
                   "models that fit each grade (--model mixed, ordinal), follow the grades, "
                   "not the 'rating' column")

