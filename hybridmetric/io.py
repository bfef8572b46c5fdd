"""Reading and writing generation tables (JSON Lines, CSV, Parquet) and study folders.

Container columns (``references``, ``tests``, ``ratings``, and the per-row details
``outcomes.*``) are JSON text inside CSV and Parquet files, so every format round-trips the same
records. Other columns are kept as given; in CSV a
list or object in one is written as JSON text (and read back as that text). Files are UTF-8 (a
byte order mark is skipped); other bytes are an error that names the line. Writes are atomic: a
file is written beside its target and renamed over it, so a crash never leaves a half-written
output.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridmetric.schema import (
    OPTIONAL,
    REQUIRED,
    SCORE_PREFIX,
    Location,
    RecordError,
    is_container,
    validate,
)

#: The columns the record format names (any other is the user's own, carried through).
SCHEMA_COLUMNS = frozenset(REQUIRED + OPTIONAL)
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
STUDY_FILE = "generations.jsonl"
#: The keys of a study.toml's ``[rating]`` table.
RATING_KEYS = frozenset({"min", "max", "useful", "question", "meaning"})
STUDY_META = "study.toml"


def file_format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"{path}: unknown extension '{suffix}'; use one of {sorted(set(FORMATS))}"
        )
    return FORMATS[suffix]


def _text_lines(path: Path, json_lines: bool = False) -> Iterator[tuple[int, str]]:
    """The numbered lines of a UTF-8 file (a leading byte order mark skipped; lines end in LF,
    CRLF or CR); bytes that are not UTF-8 raise a RecordError naming the line. ``json_lines``:
    a CR in a line that ends in LF is JSON whitespace, not a line end (only a file whose lines
    end in CR alone is split there)."""
    number = 0
    with path.open("rb") as handle:
        for raw in handle:
            if raw.endswith(b"\r\n"):
                raw = raw[:-2] + b"\n"
            lf_line = json_lines and raw.endswith(b"\n")
            for data in (raw,) if lf_line else raw.split(b"\r"):
                number += 1
                if number == 1 and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise RecordError(str(path), f"line {number}", None,
                                      f"not UTF-8 text (byte 0x{data[error.start]:02x} at "
                                      f"column {error.start + 1}); save the file as UTF-8"
                                      ) from None
                yield number, text


class _Repeated(dict):
    """A JSON object that names one key twice (``json`` would keep the last value, silently),
    or holds one that does: ``path`` leads to the key (``ratings.r2``, ``cases[1].x``)."""

    path = ""


def _repeated_path(value: Any) -> str | None:
    """Where in ``value`` (an object's value) a key is named twice: ``.key...``, ``[k]...``."""
    if isinstance(value, _Repeated):
        return "." + value.path
    if isinstance(value, list):
        for index, item in enumerate(value):
            inner = _repeated_path(item)
            if inner is not None:
                return f"[{index}]{inner}"
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    path = None
    if len(found) < len(pairs):
        keys = [key for key, _ in pairs]
        path = next(key for key in keys if keys.count(key) > 1)
    else:
        for key, value in found.items():
            inner = _repeated_path(value)
            if inner is not None:
                path = key + inner
                break
    if path is None:
        return found
    repeated = _Repeated(found)
    repeated.path = path
    return repeated


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, Location]:
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, text in _text_lines(path, json_lines=True):
        if not text.strip():
            continue
        if not rows and text.lstrip().startswith("["):
            raise RecordError(str(path), f"line {number}", None,
                              "a JSON array; records are read as JSON Lines, one object per "
                              "line (`jq -c '.[]' FILE > FILE.jsonl` converts an array)")
        try:
            # (without its line end: a line that stops short errs at its end, not on a next line)
            row = json.loads(text.removesuffix("\n"), object_pairs_hook=_object)
        except json.JSONDecodeError as error:
            problem = error.msg.removesuffix(" at")  # ("Invalid control character at")
            raise RecordError(str(path), f"line {number}", None,
                              f"not valid JSON ({problem} at column {error.colno}); records are "
                              "read as JSON Lines, one object per line") from None
        repeated = _repeated_path(row)
        if repeated is not None:
            raise RecordError(str(path), f"line {number}", repeated.removeprefix("."),
                              "the key appears twice in one object; keep one")
        if not isinstance(row, dict):
            raise RecordError(str(path), f"line {number}", None,
                              f"expected a JSON object, got {type(row).__name__}")
        rows.append(row)
        lines.append(number)
    # (objects as JSON gave them: no column converted, so an error quotes the value as written,
    # 3 and not 3.0, and a string that is no UTF-8 reaches the check that names it)
    return pd.DataFrame(rows, dtype=object), Location(str(path), "line", lines)


def _decode_containers(frame: pd.DataFrame, where: Location) -> pd.DataFrame:
    for column in filter(is_container, frame.columns):
        frame[column] = pd.Series([_decoded(value, where, position, column)
                                   for position, value in enumerate(frame[column].tolist())],
                                  index=frame.index, dtype=object)
    return frame


def _decoded(value: Any, where: Location, position: int, column: str) -> Any:
    """A container cell's value: JSON text decoded (a Parquet string column, a CSV cell)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        hint = ("; strings in JSON take double quotes: [\"x = 1\"], not ['x = 1']"
                if "'" in value else "")
        raise RecordError(where.source, where.of(position), column,
                          f"not valid JSON text ({error.msg}){hint}") from None


def _holds_array(value: Any) -> bool:
    """Whether a cell is, or holds, a numpy array (a Parquet list as pandas reads it)."""
    if isinstance(value, dict):
        return any(map(_holds_array, value.values()))
    return isinstance(value, np.ndarray)


def _native(value: Any) -> Any:
    """A Parquet list or struct cell as JSON would give it: arrays as lists, and a struct
    without the fields it lacks (a struct column has every row's fields, null where a row has
    none: a rater who did not grade it, a ``tests`` without a prefix)."""
    if isinstance(value, str) or value is None:
        return value
    value = plain(value)
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _from_csv_text(frame: pd.DataFrame, where: Location) -> pd.DataFrame:
    """Give CSV text cells their types, row by row (an error names the first bad row). An
    empty cell is an absent value, except in ``candidate``, where it is the empty program (CSV
    cannot tell the two apart)."""
    columns = [c for c in frame.columns if c != "candidate"]
    cells = {c: [None if v == "" else v for v in frame[c]] for c in columns}
    for position in range(len(frame)):
        for column in columns:
            value = cells[column][position]
            if value is None:
                continue
            if column == "rating" or column.startswith("score."):
                try:
                    cells[column][position] = float(value)
                except ValueError:
                    raise RecordError(where.source, where.of(position), column,
                                      f"expected a number, got {value!r:.60}") from None
            elif is_container(column):
                cells[column][position] = _decoded(value, where, position, column)
    for column in columns:
        frame[column] = pd.Series(cells[column], index=frame.index, dtype=object)
    return frame


def read_generations(source: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """Read and validate a generations table from a file, a study folder, or a DataFrame."""
    if isinstance(source, pd.DataFrame):
        frame = source.reset_index(drop=True)
        for column in filter(is_container, frame.columns):  # (pd.read_parquet's arrays)
            frame[column] = pd.Series([_native(v) if _holds_array(v) else v
                                       for v in frame[column]], dtype=object)
        return validate(frame, Location("<DataFrame>", "row", range(len(frame))))
    path = Path(source)
    if path.is_dir():
        return read_study(path).generations
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or study folder")
    kind = file_format(path)
    if kind == "jsonl":
        frame, where = _read_jsonl(path)
    elif kind == "csv":
        header: list[str] = []
        for number, text in _text_lines(path):  # (not UTF-8: the line is named)
            if number == 1:
                header = next(csv.reader([text]), [])
        twice = sorted({name for name in header if header.count(name) > 1})
        if twice:
            raise RecordError(str(path), "header", twice[0], "the column appears twice; keep one")
        with path.open(newline="", encoding="utf-8-sig") as handle:  # (a cut row: no value)
            records = (row for row in csv.reader(handle) if row)  # (blank lines: none)
            for number, fields in enumerate(records, start=1):
                if len(fields) != len(header):
                    raise RecordError(str(path), f"row {number}", None,
                                      f"{len(fields)} field(s) where the header names "
                                      f"{len(header)} ({', '.join(header)})")
        # Every cell is read as text; the header is row 1, as a spreadsheet shows it.
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False,
                                encoding="utf-8-sig").astype(object)
        except pd.errors.ParserError as error:
            raise RecordError(str(path), "table", None, f"not a valid CSV table ({error})"
                              ) from None
        where = Location(str(path), "row", range(2, len(frame) + 2))
        frame = _from_csv_text(frame, where)
    else:
        import pyarrow.parquet  # (pandas' own Parquet engine)
        import pyarrow.types

        frame = pd.read_parquet(path).astype(object)
        frame = frame.where(frame.notna(), None)
        where = Location(str(path), "row", range(len(frame)))
        # (pandas gives a map<string, double> cell as (key, value) pairs)
        maps = {f.name for f in pyarrow.parquet.read_schema(path) if pyarrow.types.is_map(f.type)}
        for column in filter(is_container, frame.columns):  # native lists, structs and maps
            cells = [dict(v) if column in maps and v is not None else v for v in frame[column]]
            frame[column] = pd.Series([_native(v) for v in cells], index=frame.index,
                                      dtype=object)
        frame = _decode_containers(frame, where)
    if frame.empty:
        raise RecordError(str(path), "file", None, "holds no rows (an empty table); nothing "
                          "to score, fit or audit")
    return validate(frame, where)


def _absent(value: Any) -> bool:
    """Whether a cell of a column of the user's own is a key its JSON Lines row did not have:
    pandas fills those with NaN, where a JSON null is None (a ``NaN``, which JSON does not
    have but Python's reader takes, is written as absent too)."""
    return isinstance(value, float) and math.isnan(value)


def plain(value: Any) -> Any:
    """JSON-ready value: NaN becomes null, numpy scalars and arrays become Python ones, at any
    depth of lists and objects (Parquet gives nested values as arrays)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if hasattr(value, "tolist"):
        converted = value.tolist()
        return plain(converted) if isinstance(converted, list) else converted
    return value


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it is renamed over ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                        suffix=".tmp")
    except OSError as error:  # (named by the file asked for, not the temporary one)
        raise OSError(error.errno, f"cannot write {target}: {error.strerror}") from error
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        temporary.chmod(0o666 & ~umask)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def write_generations(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``frame`` to ``path`` in the format its extension names, atomically."""
    path = Path(path)
    kind = file_format(path)
    with atomic_path(path) as temporary:
        if kind == "jsonl":
            columns = list(frame.columns)
            # (a column of the user's own, carried through: a row that had no such key gets
            # none, where one that had it as null keeps its null)
            own = [c not in SCHEMA_COLUMNS and not c.startswith(SCORE_PREFIX) for c in columns]
            with temporary.open("w", encoding="utf-8") as handle:
                for row in frame.itertuples(index=False, name=None):
                    record = {c: plain(v) for c, v, carried in zip(columns, row, own, strict=True)
                              if not (carried and _absent(v))}
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            flat = frame.copy()
            flat.attrs.clear()  # (pandas writes them into a Parquet file's metadata)
            for column in flat.columns:
                if is_container(column):
                    flat[column] = [None if v is None else json.dumps(plain(v),
                                                                      ensure_ascii=False)
                                    for v in flat[column]]
                elif kind == "csv":  # a list or object elsewhere: JSON text, not a Python repr
                    flat[column] = [json.dumps(plain(v), ensure_ascii=False)
                                    if isinstance(v, dict | list | tuple | np.ndarray) else v
                                    for v in flat[column]]
            if kind == "csv":
                # (RFC 4180 line ends: a cell holding a bare CR is then quoted, where with LF
                # alone it would be written bare and read back as two rows)
                flat.to_csv(temporary, index=False, lineterminator="\r\n")
            else:
                flat.to_parquet(temporary, index=False)
    return path


def frame_hash(frame: pd.DataFrame) -> str:
    """A content hash of a table (column names and values), stable across file formats."""
    digest = hashlib.sha256()
    digest.update(json.dumps(list(frame.columns)).encode())
    for row in frame.itertuples(index=False, name=None):
        digest.update(json.dumps([plain(v) for v in row], sort_keys=True, default=str).encode())
    return digest.hexdigest()


@dataclass
class Study:
    """A study folder: its generations and the metadata of ``study.toml``."""

    path: Path
    meta: dict[str, Any]
    generations: pd.DataFrame = field(repr=False)

    @property
    def name(self) -> str:
        return str(self.meta.get("name", self.path.name))

    @property
    def scale(self) -> tuple[float, float] | None:
        scale = self.meta.get("rating", {})
        if "min" in scale and "max" in scale:
            return float(scale["min"]), float(scale["max"])
        return None

    @property
    def useful(self) -> float | None:
        """The lowest rating that means useful code (``[rating] useful``), if the study says."""
        value = self.meta.get("rating", {}).get("useful")
        return None if value is None else float(value)


def read_study(folder: str | os.PathLike) -> Study:
    """Read a study folder (``generations.jsonl`` and ``study.toml``)."""
    study = read_study_meta(folder)
    study.generations = read_generations(study.path / STUDY_FILE)
    return study


def read_study_meta(folder: str | os.PathLike) -> Study:
    """A study folder's ``study.toml``, checked, without its generations (an empty table)."""
    folder = Path(folder)
    meta_path, data_path = folder / STUDY_META, folder / STUDY_FILE
    for required in (meta_path, data_path):
        if not required.exists():
            raise FileNotFoundError(
                f"{folder}: not a study folder, {required.name} is missing "
                f"(a study holds {STUDY_FILE} and {STUDY_META})"
            )
    with meta_path.open("rb") as handle:
        try:
            meta = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{meta_path}: not valid TOML: {error}") from None
    _check_rating(meta, meta_path)
    return Study(folder, meta, pd.DataFrame())


def _check_rating(meta: dict[str, Any], path: Path) -> None:
    """``[rating]``: ``min`` and ``max`` numbers (both or neither), ``min < max``, and
    ``useful`` a number on that scale."""
    rating = meta.get("rating", {})
    if not isinstance(rating, dict):
        raise ValueError(f"{path}: 'rating' must be a table ([rating] with min, max, ...)")
    unknown = sorted(set(rating) - RATING_KEYS)
    if unknown:  # (a misspelt min or max would leave the scale to the observed ratings)
        raise ValueError(f"{path}: unknown key(s) {unknown} in [rating]; it takes "
                         f"{', '.join(sorted(RATING_KEYS))}")
    for key in ("min", "max", "useful"):
        value = rating.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value)):
            raise ValueError(f"{path}: [rating] {key} must be a number, got {value!r}")
    if ("min" in rating) != ("max" in rating):
        raise ValueError(f"{path}: [rating] gives {'min' if 'min' in rating else 'max'} "
                         "alone; give both ends of the scale, or neither")
    if "min" in rating and not rating["min"] < rating["max"]:
        raise ValueError(f"{path}: [rating] min ({rating['min']}) must be below max "
                         f"({rating['max']})")
    useful = rating.get("useful")
    if useful is not None and "min" in rating and not rating["min"] <= useful <= rating["max"]:
        raise ValueError(f"{path}: [rating] useful ({useful}) lies outside the scale "
                         f"{rating['min']} to {rating['max']}")
