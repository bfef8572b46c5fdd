"""Reading, validating and writing generation tables."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hybridmetric import RecordError, read_generations, read_study, write_generations
from hybridmetric.schema import with_rater_mean

CONALA = Path(__file__).resolve().parents[1] / "studies" / "conala"

ROWS = [
    {"task_id": "t1", "system": "a", "candidate": "x = 1", "references": ["x = 1", "x=1"],
     "context": "set x", "rating": 3.5, "ratings": {"r1": 3.0, "r2": 4.0},
     "tests": {"prefix": "", "suffix": "\n", "cases": ["assert x == 1\n"], "timeout_s": 5}},
    {"task_id": "t2", "system": "b", "language": "javascript", "candidate": "",
     "references": None, "rating": None},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_defaults_and_normalisation(tmp_path):
    frame = read_generations(write_jsonl(tmp_path / "g.jsonl", ROWS))
    assert frame["language"].tolist() == ["python", "javascript"]
    assert frame.loc[0, "references"] == ["x = 1", "x=1"]
    assert frame.loc[1, "references"] is None
    assert math.isnan(frame.loc[1, "rating"])


@pytest.mark.parametrize("extension", [".jsonl", ".csv", ".parquet"])
def test_round_trip(tmp_path, extension):
    original = read_generations(write_jsonl(tmp_path / "g.jsonl", ROWS))
    original["score.edit_sim"] = [0.25, float("nan")]
    path = write_generations(original, tmp_path / f"out{extension}")
    again = read_generations(path)
    assert list(again.columns) == list(original.columns)
    for column in original.columns:
        for a, b in zip(original[column], again[column], strict=True):
            if isinstance(a, float) and math.isnan(a):
                assert isinstance(b, float) and math.isnan(b), column
            else:
                assert a == b, column


def test_a_key_of_the_user_s_own_that_a_row_lacks_stays_absent(tmp_path):
    """Columns of the user's own come back from JSON Lines as they went in: a row without the
    key gets none (it gained ``"note": null``), a row with a null keeps its null."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"task_id": "t1", "candidate": "a", "note": "x", "extra": null}\n'
                      '{"task_id": "t2", "candidate": "b", "extra": 1}\n'
                      '{"task_id": "t3", "candidate": "c", "rating": null}\n')
    written = write_generations(read_generations(source), tmp_path / "out.jsonl")
    rows = [json.loads(line) for line in written.read_text().splitlines()]
    assert [{k: v for k, v in row.items() if k in ("note", "extra")} for row in rows] == [
        {"note": "x", "extra": None}, {"extra": 1}, {}]
    assert [row["rating"] for row in rows] == [None, None, None]  # (the record format's own)


def test_dataframe_input_is_validated():
    with pytest.raises(RecordError, match=r"<DataFrame>: row 1, field 'candidate'"):
        read_generations(pd.DataFrame({"task_id": ["a", "b"], "candidate": ["x", 3]}))
    # a nullable column's missing value (pd.NA) is absent, as None and NaN are
    frame = read_generations(pd.DataFrame({
        "task_id": ["a", "b"], "candidate": ["x", "y"],
        "context": pd.array(["set x", pd.NA], dtype="string"),
        "rating": pd.array([1.5, pd.NA], dtype="Float64")}))
    assert frame["context"].tolist()[0] == "set x" and pd.isna(frame["context"].tolist()[1])
    assert pd.isna(frame["rating"].tolist()[1])


def test_a_lone_surrogate_is_named_where_it_is(tmp_path):
    """JSON may escape half of a surrogate pair (\\ud800), which is no character: no UTF-8
    file, tokenizer or parser takes it. The error names the line and field."""
    path = tmp_path / "g.jsonl"
    path.write_text('{"task_id": "t", "candidate": "x"}\n'
                    '{"task_id": "u", "candidate": "y", "references": ["a\\udc80b"]}\n')
    with pytest.raises(RecordError, match=r"line 2, field 'references': holds '\\udc80' at "
                       r"character 2, half of a UTF-16 surrogate pair"):
        read_generations(path)
    with pytest.raises(RecordError, match=r"row 0, field 'candidate': holds '\\ud800'"):
        read_generations(pd.DataFrame({"task_id": ["t"], "candidate": ["\ud800"]}, dtype=object))


def test_a_carriage_return_is_json_whitespace_and_a_csv_cell_keeps_it(tmp_path):
    """JSON Lines end at LF (a CR between tokens is whitespace, not a line end); a cell that
    holds a bare CR is written quoted to CSV and read back whole."""
    path = tmp_path / "g.jsonl"
    path.write_bytes(b'{"task_id": "t",\r "candidate": "x = 1\\rprint(x)"}\r\n')
    frame = read_generations(path)
    assert frame["candidate"].tolist() == ["x = 1\rprint(x)"]
    again = read_generations(write_generations(frame, tmp_path / "g.csv"))
    assert again["candidate"].tolist() == ["x = 1\rprint(x)"]


@pytest.mark.parametrize(("line", "message"), [
    ('{"task_id": "t", "candidate": 5}', r"line 2, field 'candidate': expected a string, got int"),
    ('{"task_id": "t", "candidate": "x", "references": "x"}',
     r"line 2, field 'references': expected a list of strings"),
    ('{"task_id": "t", "candidate": "x", "rating": "high"}', r"line 2, field 'rating'"),
    ('{"task_id": "t", "candidate": "x", "ratings": {"r1": "4"}}',
     r"line 2, field 'ratings': rater 'r1' has a non-numeric grade '4'"),
    ('{"task_id": "t", "candidate": "x", "ratings": {"r1": Infinity}}',
     r"line 2, field 'ratings': rater 'r1' has a grade that is not finite: inf"),
    ('{"task_id": "t", "candidate": "x", "ratings": {"r1": 2, "": 3}}',
     r"line 2, field 'ratings': a rater is named by an empty string$"),
    ('{"task_id": "t", "candidate": "x", "ratings": {" ": 3}}',
     r"line 2, field 'ratings': a rater is named by ' '$"),
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": "assert 1"}}',
     r"line 2, field 'tests': 'cases' must be a list of strings"),
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": []}}',
     r"line 2, field 'tests': 'cases' is empty"),
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": [], "timeout": 1}}',
     r"line 2, field 'tests': unknown key"),
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": ["1"], "timeout_s": NaN}}',
     r"line 2, field 'tests': 'timeout_s' must be a positive number of seconds, got nan$"),
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": ["1"], "timeout_s": Infinity}}',
     r"line 2, field 'tests': 'timeout_s' must be a positive number of seconds, got inf$"),
    # (an integer too large for a float, which json reads whole: math.isfinite overflowed)
    ('{"task_id": "t", "candidate": "x", "tests": {"cases": ["1"], "timeout_s": 1%s}}'
     % ("0" * 400),
     r"line 2, field 'tests': 'timeout_s' must be a positive number of seconds, got 1000"),
    ('{"task_id": "t", "candidate": "x", "rating": 1%s}' % ("0" * 400),
     r"line 2, field 'rating': expected a finite number, got int 1000"),
    ('{"task_id": "t", "candidate": "x", "ratings": {"r": 1%s}}' % ("0" * 400),
     r"line 2, field 'ratings': rater 'r' has a grade that is not finite: 1000"),
    ('{"task_id": "t", "candidate": "x", "score.x": 1%s}' % ("0" * 400),
     r"line 2, field 'score.x': expected a number, got int 1000"),
    ('{"task_id": "t", "candidate": null}', r"line 2, field 'candidate': value is missing"),
    # (an empty name would be a task or a system of its own, which a CSV's empty cell is not)
    ('{"task_id": "", "candidate": "x"}', r"line 2, field 'task_id': task_id is empty$"),
    ('{"task_id": " \\t", "candidate": "x"}',
     r"line 2, field 'task_id': task_id is only white space$"),
    ('{"task_id": "t", "candidate": "x", "system": ""}',
     r"line 2, field 'system': system is empty$"),
    # (the other row has no language: the value is quoted as written, not as a float column's)
    ('{"task_id": "t", "candidate": "x", "language": 3}',
     r"line 2, field 'language': expected a string, got int 3$"),
    ('{"task_id": "t", "candidate": "x"',
     r"line 2: not valid JSON \(Expecting ',' delimiter at column 34\)"),
    ('{"task_id": "t", "candidate": "a\tb"}',
     r"line 2: not valid JSON \(Invalid control character at column 33\)"),
    ('["t", "x"]', r"line 2: expected a JSON object"),
])
def test_bad_jsonl_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task_id": "ok", "candidate": "y"}\n' + line + "\n")
    with pytest.raises(RecordError, match=message) as error:
        read_generations(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("text", [
    '[{"task_id": "t", "candidate": "x"}]',
    '\n  [\n  {"task_id": "t", "candidate": "x"}\n]',
])
def test_a_json_array_is_told_apart_from_json_lines(tmp_path, text):
    path = tmp_path / "g.json"
    path.write_text(text + "\n")
    with pytest.raises(RecordError, match=r"a JSON array; records are read as JSON Lines"):
        read_generations(path)


def test_blank_lines_keep_line_numbers(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"task_id": "a", "candidate": "x"}\n\n{"task_id": "b"}\n')
    with pytest.raises(RecordError, match="line 3, field 'candidate'"):
        read_generations(path)


def test_missing_required_column(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("task_id,code\nt1,x\n")
    with pytest.raises(RecordError, match=r"g.csv: header, field 'candidate': required column"):
        read_generations(path)


def test_a_csv_cell_may_hold_line_breaks_and_blank_lines_are_no_rows(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text('task_id,candidate,rating\nt1,"x = 1\ny = 2",1\n\nt2,z,2\n')
    frame = read_generations(path)
    assert frame["candidate"].tolist() == ["x = 1\ny = 2", "z"]


def test_csv_rows_are_numbered_like_a_spreadsheet(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text('task_id,candidate,references\nt1,x,"[""x""]"\nt2,y,[not json\n')
    with pytest.raises(RecordError, match=r"row 3, field 'references': not valid JSON"):
        read_generations(path)
    # the first bad row, whichever its field (the rating column is converted first)
    path.write_text('task_id,candidate,references,rating\nt1,x,"[""x""]",1\nt2,y,[no,2\n'
                    't3,z,"[""z""]",abc\n')
    with pytest.raises(RecordError, match=r"row 3, field 'references': not valid JSON"):
        read_generations(path)
    path.write_text("task_id,candidate,references\nt1,x,['x = 1']\n")  # a Python list
    with pytest.raises(RecordError, match=r"row 2, field 'references': not valid JSON text "
                       r"\(.*\); strings in JSON take double quotes"):
        read_generations(path)


@pytest.mark.parametrize(("name", "text"), [("g.jsonl", ""), ("g.jsonl", "\n\n"),
                                            ("g.csv", "task_id,candidate\n")])
def test_a_file_without_rows_says_so(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RecordError, match=rf"{name}: file: holds no rows"):
        read_generations(path)


def test_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match="unknown extension '.txt'"):
        read_generations(write_jsonl(tmp_path / "g.txt", ROWS))


def test_study_folder(tmp_path):
    write_jsonl(tmp_path / "generations.jsonl", ROWS)
    with pytest.raises(FileNotFoundError, match="study.toml is missing"):
        read_study(tmp_path)
    (tmp_path / "study.toml").write_text('name = "mini"\n[rating\n')
    with pytest.raises(ValueError, match=r"study\.toml: not valid TOML: .*line 2"):
        read_study(tmp_path)
    for rating, message in (("min = 4\nmax = 0", r"min \(4\) must be below max \(0\)"),
                            ('min = "0"\nmax = 4', "min must be a number, got '0'"),
                            ("min = 0", "gives min alone"),
                            ("min = 0\nmax = 4\nuseful = 7", r"useful \(7\) lies outside"),
                            ("minimum = 0\nmax_ = 4",
                             r"unknown key\(s\) \['max_', 'minimum'\] in ")):
        (tmp_path / "study.toml").write_text(f'name = "mini"\n[rating]\n{rating}\n')
        with pytest.raises(ValueError, match=r"study\.toml: (\[rating\] )?" + message):
            read_study(tmp_path)
    (tmp_path / "study.toml").write_text('name = "mini"\n[rating]\nmin = 0\nmax = 4\n')
    study = read_study(tmp_path)
    assert (study.name, study.scale, len(study.generations)) == ("mini", (0.0, 4.0), 2)
    assert len(read_generations(tmp_path)) == 2


def test_embedded_conala_study():
    study = read_study(CONALA)
    frame = study.generations
    assert len(frame) == 2360 and frame["task_id"].nunique() == 472
    assert frame.groupby("task_id")["system"].nunique().eq(5).all()
    means = frame["ratings"].map(lambda r: sum(r.values()) / len(r))
    assert (means - frame["rating"]).abs().max() < 1e-12
    assert study.scale == (0.0, 4.0)


def test_conala_build_script_reproduces_committed_file(shared_data, tmp_path):
    out = tmp_path / "g.jsonl"
    subprocess.run([sys.executable, str(CONALA / "build.py"), "--source",
                    str(shared_data / "conala-human-grades"), "--output", str(out)], check=True)
    assert out.read_bytes() == (CONALA / "generations.jsonl").read_bytes()


def test_atomic_write_has_normal_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        path = write_generations(read_generations(write_jsonl(tmp_path / "g.jsonl", ROWS)),
                                 tmp_path / "out.csv")
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_file_that_cannot_be_written_is_named_as_asked(tmp_path):
    """Not by the temporary file beside it that the atomic write makes first."""
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    target = folder / "out.csv"
    frame = read_generations(write_jsonl(tmp_path / "g.jsonl", ROWS))
    if os.access(folder, os.W_OK):  # (root writes anywhere: a folder that cannot hold files)
        target = Path("/proc/out.csv")
    with pytest.raises(OSError, match=f"cannot write {re.escape(str(target))}: "):
        write_generations(frame, target)


def test_conala_odex_build_script_reproduces_committed_file(shared_data, tmp_path):
    study = CONALA.parent / "conala-odex"
    out = tmp_path / "g.jsonl"
    subprocess.run([sys.executable, str(study / "build.py"), "--odex",
                    str(shared_data / "odex-conala-execution" / "en_test.jsonl"),
                    "--output", str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (study / "generations.jsonl").read_bytes()
    frame = read_study(study).generations
    assert len(frame) == 1875 and frame["task_id"].nunique() == 375
    notes = frame["exec_note"].value_counts()
    assert notes["network-test"] == 30 and notes["tests-broken"] == 90
    assert frame["tests"].isna().sum() == 120


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "g.jsonl"
    good = json.dumps({"task_id": "t1", "candidate": "x"}).encode()
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\n" + good.replace(b'"x"', b'"caf\xe9"') + b"\n")
    with pytest.raises(RecordError, match=r"g\.jsonl: line 2: not UTF-8 text \(byte 0xe9"):
        read_generations(path)
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\n")  # a byte order mark is skipped
    assert read_generations(path)["candidate"].tolist() == ["x"]
    path.write_bytes(b"\xef\xbb\xbf" + good[:-2] + b'\xff"}\n')  # the byte itself is named
    with pytest.raises(RecordError, match=r"line 1: not UTF-8 text \(byte 0xff"):
        read_generations(path)
    path.write_bytes(good + b"\r" + good + b"\r")  # lines that end in CR alone
    assert len(read_generations(path)) == 2
    csv = tmp_path / "g.csv"
    csv.write_bytes(b"task_id,candidate\nt1,x\nt2,caf\xe9\n")
    with pytest.raises(RecordError, match=r"g\.csv: line 3: not UTF-8"):
        read_generations(csv)


def test_nested_values_in_other_columns_are_kept(tmp_path):
    frame = read_generations(write_jsonl(tmp_path / "g.jsonl", ROWS))
    frame["extra"] = [{"nested": [1, 2]}, None]
    again = read_generations(write_generations(frame, tmp_path / "g.parquet"))
    out = write_generations(again, tmp_path / "back.jsonl")  # Parquet gives numpy arrays
    assert json.loads(out.read_text().splitlines()[0])["extra"] == {"nested": [1, 2]}
    frame["extra"] = [{"nested": [1, 2]}, "note"]
    csv = write_generations(frame, tmp_path / "g.csv")  # JSON text, not a Python repr
    assert read_generations(csv)["extra"].tolist() == ['{"nested": [1, 2]}', "note"]


def test_parquet_with_native_lists_and_structs_reads_as_json_would(tmp_path):
    """``DataFrame.to_parquet`` stores lists as list columns and dicts as structs, whose every
    row has every field (null where a row has none): read as the JSON Lines file would be."""
    rows = [{"task_id": "t1", "candidate": "a", "references": ["a", "b"],
             "ratings": {"r1": 3.0, "r2": 4.0},
             "tests": {"prefix": "x = 1\n", "cases": ["assert x == 1\n"]}},
            {"task_id": "t2", "candidate": "b", "references": ["c"], "ratings": {"r1": 1.0},
             "tests": {"cases": ["assert True\n"], "timeout_s": 5.0}}]
    path = tmp_path / "native.parquet"
    pd.DataFrame(rows).to_parquet(path)  # (pyarrow: list<string> and struct columns)
    frame = read_generations(path)
    expected = read_generations(write_jsonl(tmp_path / "g.jsonl", rows))
    for column in ("references", "ratings", "tests"):
        assert frame[column].tolist() == expected[column].tolist(), column
    # raters' grades as an Arrow map (pandas gives its cells as pairs), a row without any
    import pyarrow as pa
    import pyarrow.parquet as pq

    grades = pa.array([[("r1", 3.0), ("r2", 4.0)], None], pa.map_(pa.string(), pa.float64()))
    table = pa.table({"task_id": ["t1", "t2"], "candidate": ["a", "b"], "ratings": grades})
    pq.write_table(table, tmp_path / "map.parquet")
    assert read_generations(tmp_path / "map.parquet")["ratings"].tolist() == [
        {"r1": 3.0, "r2": 4.0}, None]
    # a null grade in JSON is the same absent grade as a struct's null field; so is a NaN, as a
    # NaN rating is a missing rating
    for absent in (None, float("nan")):
        rows[1]["ratings"] = {"r1": 1.0, "r2": absent}
        assert read_generations(write_jsonl(tmp_path / "g.jsonl", rows))["ratings"].tolist() == [
            {"r1": 3.0, "r2": 4.0}, {"r1": 1.0}]
    # the DataFrame pd.read_parquet gives (lists as numpy arrays) reads as the file does
    given = read_generations(pd.read_parquet(path))
    for column in ("references", "tests"):
        assert given[column].tolist() == expected[column].tolist(), column


@pytest.mark.parametrize(("name", "text", "message"), [
    ("g.csv", "task_id,candidate,rating,rating\nt1,x,1,2\n",
     r"g\.csv: header, field 'rating': the column appears twice"),
    ("g.csv", "task_id,candidate\nt1,x\nt2,y,z\n",
     r"g\.csv: row 3: 3 field\(s\) where the header names 2 \(task_id, candidate\)"),
    # a row cut short: its missing cells are no empty candidate and no missing rating
    ("g.csv", "task_id,candidate,rating\nt1,x,1\nt2\n",
     r"g\.csv: row 3: 1 field\(s\) where the header names 3"),
    ("g.jsonl", '{"task_id": "t1", "candidate": "x"}\n{"task_id": "t2", "candidate": "y", '
                '"candidate": "z"}\n', r"g\.jsonl: line 2, field 'candidate': the key appears "
                                       r"twice"),
    ("g.jsonl", '{"task_id": "t1", "candidate": "x", "ratings": {"a": 1, "a": 2}}\n',
     r"g\.jsonl: line 1, field 'ratings\.a': the key appears twice"),
    ("g.jsonl", '{"task_id": "t1", "candidate": "x", "tests": {"cases": ["assert 1"], '
                '"extra": [[{"k": 1}], [{"k": 1, "k": 2}]]}}\n',
     r"g\.jsonl: line 1, field 'tests\.extra\[1\]\[0\]\.k': the key appears twice"),
])
def test_a_value_that_would_be_lost_or_a_broken_table_is_named(tmp_path, name, text, message):
    """A duplicated column or key would lose one of its values (pandas renames a CSV column
    ``rating.1``, ``json`` keeps the last key); a ragged CSV row is named with its file
    (quoted line breaks and blank lines are no rows)."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RecordError, match=message):
        read_generations(path)


def test_select_rows_by_text_number_and_csv_cell(tmp_path):
    """--where: text as written, a number as a number, a CSV cell (text) either way; missing
    values never match; the rows kept still name their lines."""
    from hybridmetric.schema import row_label, select_rows, where_conditions, where_text

    rows = [{"task_id": f"t{k}", "candidate": "x", "system": system, "year": year,
             "flag": flag}
            for k, (system, year, flag) in enumerate([("a", 2021, True), ("b", 2022, False),
                                                      ("c", None, True), ("2", 2022.0, None)])]
    for name, writer in (("g.jsonl", lambda p: write_jsonl(p, rows)),
                         ("g.csv", lambda p: write_generations(pd.DataFrame(rows), p))):
        table = read_generations(writer(tmp_path / name))
        kept = select_rows(table, ["year=2022"])
        assert kept["task_id"].tolist() == ["t1", "t3"]
        assert row_label(kept, 1) == f"{tmp_path / name}, " + (
            "line 4" if name.endswith("jsonl") else "row 5")
        assert select_rows(table, ["system=a", "system=c"])["task_id"].tolist() == ["t0", "t2"]
        assert select_rows(table, ["year=2022", "system=2"])["task_id"].tolist() == ["t3"]
        if name.endswith("csv"):  # a CSV cell's text is a number too (JSON text: below)
            assert select_rows(table, ["system=2.0"])["task_id"].tolist() == ["t3"]
    table = read_generations(tmp_path / "g.jsonl")  # JSON text is text: "2.0" is not "2"
    assert select_rows(table, ["flag=true"])["task_id"].tolist() == ["t0", "t2"]
    with pytest.raises(ValueError, match=r"no row is left where system is '2.0' \(none from "
                                         r"'system' on\); 'system' holds '2', 'a', 'b', 'c'"):
        select_rows(table, ["system=2.0"])
    with pytest.raises(ValueError, match="the table has no field 'model'; its fields: task_id"):
        select_rows(table, ["model=a"])
    with pytest.raises(ValueError, match="expects FIELD=VALUE"):
        select_rows(table, ["system"])
    with pytest.raises(ValueError, match="'references' holds lists or objects"):
        select_rows(table.assign(references=[["x"]] * 4), ["references=x"])
    assert where_text(["system=a", "year=1", "system=b"]) == (
        "system is 'a' or 'b', and year is '1'")
    assert where_conditions("system=b") == ["system=b"]  # (one condition, as text)
    assert where_conditions(["year=1", "system=b", "year=1"]) == ["system=b", "year=1"]


def test_select_rows_reads_a_language_as_the_sandbox_does(tmp_path):
    """``language=js`` keeps the rows written ``javascript`` or ``JS``, as the sandbox runs them
    all as JavaScript; a row without a language is Python; other fields stay as written."""
    from hybridmetric.schema import select_rows

    rows = [{"task_id": f"t{k}", "candidate": "x", "system": system, "language": language}
            for k, (system, language) in enumerate([("JS", "javascript"), ("js", "JS"),
                                                    ("c", "C++"), ("d", None), ("e", "cpp")])]
    table = read_generations(write_jsonl(tmp_path / "g.jsonl", rows))
    assert select_rows(table, ["language=js"])["task_id"].tolist() == ["t0", "t1"]
    assert select_rows(table, ["language=JavaScript"])["task_id"].tolist() == ["t0", "t1"]
    assert select_rows(table, ["language=cxx"])["task_id"].tolist() == ["t2", "t4"]
    assert select_rows(table, ["language=py", "language=c++"])["task_id"].tolist() == [
        "t2", "t3", "t4"]
    assert select_rows(table, ["system=js"])["task_id"].tolist() == ["t1"]
    with pytest.raises(ValueError, match="no row is left where language is 'java'"):
        select_rows(table, ["language=java"])


def test_select_rows_compares_booleans_and_large_integers_alike_in_csv_and_json(tmp_path):
    from hybridmetric.schema import select_rows

    rows = [{"task_id": f"t{k}", "candidate": "x", "flag": k == 1, "big": 2**53 + k}
            for k in range(3)]
    for name, writer in (("g.jsonl", lambda p: write_jsonl(p, rows)),
                         ("g.csv", lambda p: write_generations(pd.DataFrame(rows), p))):
        table = read_generations(writer(tmp_path / name))
        for value in ("true", "True", "TRUE"):
            assert select_rows(table, [f"flag={value}"])["task_id"].tolist() == ["t1"], name
        assert select_rows(table, [f"big={2**53 + 1}"])["task_id"].tolist() == ["t1"], name
        assert select_rows(table, [f"big={float(2**53)}"])["task_id"].tolist() == ["t0"], name


def test_a_rating_apart_from_its_raters_mean_grade_is_noted():
    """A study's `rating` may be a median or a consensus: kept, with a note naming the first row
    where it is not the raters' mean (the ceiling and the rater models use the grades)."""
    frame = pd.DataFrame({"task_id": ["a", "b", "c", "d"], "candidate": ["w", "x", "y", "z"],
                          "rating": [2.0, 3.0, float("nan"), 1.5],
                          "ratings": [{"r1": 1.0, "r2": 3.0}, {"r1": 4.0, "r2": 4.0},
                                      {"r1": 1.0}, {"r1": 1.0, "r2": 2.0}]})
    same, note = with_rater_mean(frame, "rating")
    assert same is frame
    assert note.startswith("note: 'rating' is not the mean of the raters' grades ('ratings') in "
                           "1 of 4 rows, e.g. row 1: rating 3, mean grade 4;"), note
    assert with_rater_mean(frame.assign(rating=[2.0, 4.0, 1.0, 1.5]), "rating")[1] is None
    assert with_rater_mean(frame, "other")[1] is None
    derived, note = with_rater_mean(frame.drop(columns="rating"), "rating")
    assert derived["rating"].tolist() == [2.0, 4.0, 1.0, 1.5]
    assert "no 'rating' column" in note


def test_the_raters_mean_grade_is_the_same_in_any_order():
    """Equal grades listed in another order are a tie of the target: summed in order,
    0.1 + 0.2 + 0.3 is 0.6000000000000001, 0.3 + 0.2 + 0.1 is 0.6."""
    frame = pd.DataFrame({"task_id": ["a", "b"], "candidate": ["x", "y"],
                          "ratings": [{"r1": 0.1, "r2": 0.2, "r3": 0.3},
                                      {"r3": 0.1, "r2": 0.2, "r1": 0.3}]})
    first, second = with_rater_mean(frame, "rating")[0]["rating"]
    assert first == second == 0.6 / 3
