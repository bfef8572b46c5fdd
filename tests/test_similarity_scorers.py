"""Similarity scorers against hand-computed values and the reference packages."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sys
import types
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from codebleu import calc_codebleu
from codebleu.utils import AVAILABLE_LANGS

from hybridmetric.scorers import build
from hybridmetric.scorers.bleu import Bleu
from hybridmetric.scorers.chrf import Chrf
from hybridmetric.scorers.codebertscore import CodeBertScore
from hybridmetric.scorers.codebleu import CodeBleu, JobFailed, best_scores
from hybridmetric.scorers.edit_sim import EditSim
from hybridmetric.scorers.exact_match import ExactMatch
from hybridmetric.scorers.rouge_l import RougeL
from hybridmetric.scorers.tokenize import tranx_tokens


def frame(rows: list[tuple[str, list[str] | None]]) -> pd.DataFrame:
    return pd.DataFrame({
        "task_id": [f"t{i}" for i in range(len(rows))],
        "candidate": [c for c, _ in rows],
        "references": [r for _, r in rows],
        "language": "python",
    })


def values(scorer, rows) -> list[float]:
    with scorer:  # close() stops codebleu's worker process
        return scorer.score(frame(rows))[scorer.columns[0]].tolist()


def test_edit_sim_hand_values():
    # kitten -> sitting: 3 edits, longer length 7.
    got = values(EditSim(), [("kitten", ["sitting"]), ("", [""]), ("", ["abc"]),
                             ("kitten", ["xyz", "kitten"]), ("x", None)])
    assert got[0] == pytest.approx(1 - 3 / 7)
    assert got[1:4] == [1.0, 0.0, 1.0]
    assert math.isnan(got[4])


def test_edit_sim_token_level():
    # [a, =, b, +, 1] vs [a, =, c, +, 1]: one substitution in five tokens.
    assert values(EditSim(level="token"), [("a = b+1", ["a=c + 1"])]) == [pytest.approx(0.8)]


def test_exact_match_normalizations():
    rows = [(" x=1 \n", ["x=1"]), ("x  =  1", ["x = 1"]), ("x=1", ["x=2", "x=1"]), ("", [""])]
    assert values(ExactMatch(normalize="none"), rows) == [0.0, 0.0, 1.0, 1.0]
    assert values(ExactMatch(), rows) == [1.0, 0.0, 1.0, 1.0]
    assert values(ExactMatch(normalize="whitespace"), rows) == [1.0, 1.0, 1.0, 1.0]


def test_chrf_hand_value():
    # abc vs abd, beta 2: unigram F = 2/3, bigram F = 1/2, trigram 0; the three orders that
    # exist on both sides are averaged: (2/3 + 1/2 + 0) / 3.
    got = values(Chrf(), [("abc", ["abd"]), ("abc", ["abc"]), ("", ["abc"])])
    assert got == [pytest.approx((2 / 3 + 1 / 2) / 3, abs=1e-9), pytest.approx(1.0), 0.0]


def test_bleu_hand_value():
    # 1-4 gram precisions 3/4, 2/3, 1/2, and 0/1 smoothed to 1/(2*1); brevity penalty 1.
    expected = (0.75 * (2 / 3) * 0.5 * 0.5) ** 0.25
    got = values(Bleu(), [("a b c d", ["a b c e"]), ("a b c d", ["zz", "a b c d"])])
    assert got == [pytest.approx(expected, abs=1e-9), pytest.approx(1.0)]


def test_bleu_tranx_tokens_split_code():
    assert tranx_tokens("df.groupBy('a')") == ["df", ".", "group", "By", "(", "`", "a", "`", ")"]
    assert values(Bleu(), [("f(x)", ["f(x)"])]) == [1.0]  # (sacrebleu: 100.00000000000004)
    # tranx splits camelCase, so "getX" and "get X" are the same tokens; 13a does not.
    assert values(Bleu(), [("getX", ["get X"])]) == [pytest.approx(1.0)]
    assert values(Bleu(tokenize="13a"), [("getX", ["get X"])]) == [0.0]


def test_rouge_l_hand_value():
    # LCS of [a b c d] and [a c d e] is [a c d]: P = R = 3/4.
    got = values(RougeL(), [("a b c d", ["a c d e"]), ("", [""]), ("", ["a"])])
    assert got == [pytest.approx(0.75), 1.0, 0.0]
    # beta = 2 weights recall: P = 3/4 (3 of 4), R = 3/6.
    p, r = 3 / 4, 3 / 6
    assert values(RougeL(beta=2.0), [("a b c d", ["a c d e f g"])]) == [
        pytest.approx(5 * p * r / (r + 4 * p))]


def test_equal_exact_scores_are_equal_floats():
    """Two pairs whose exact scores are equal tie (what rank correlations count): ROUGE-L's F
    of 4/5, which its floating-point steps made 0.7999999999999999 for one pair and 0.8 for the
    other, and chrF's 5/96 (sacrebleu's counts), 0.05208333333333332 and 0.05208333333333333."""
    rouge = values(RougeL(), [("(a ** 2 + b ** 2) ** 0.5", ["(a * a + b * b) ** 0.5"]),
                              ("str(a + b)", ["str(a) + str(b)"])])
    assert rouge == [0.8, 0.8]
    chrf = values(Chrf(), [("g x b f ( f * b", ["f x min * max max ( +"]),
                           ("b - g , , min", ["* g a max"])])
    assert chrf[0] == chrf[1] == pytest.approx(5 / 96, abs=1e-12)


@pytest.mark.parametrize("scorer, crlf_changes", [
    (EditSim(), True), (ExactMatch(), True), (Chrf(), False), (Bleu(), False), (RougeL(), False),
    (CodeBleu(), False),
])
def test_texts_are_compared_as_they_are(scorer, crlf_changes):
    """What the README says: CRLF against LF changes only the scorers that do not split on
    whitespace (codebleu's default tokenizer does), and a decomposed accent (NFD) changes
    them all."""
    text = 's = "café au lait"\nprint(s)\n'
    crlf, decomposed = text.replace("\n", "\r\n"), unicodedata.normalize("NFD", text)
    same, line_ends, accent = values(scorer, [(text, [text]), (crlf, [text]),
                                              (decomposed, [text])])
    assert same == 1.0
    assert (line_ends < 1.0) is crlf_changes
    assert line_ends <= 1.0 and accent < 1.0


def test_codebleu_matches_package_and_known_cases():
    code = "x = a + b\ny = x * 2"
    cand = "y = a + b\nz = y * 3"
    got = values(CodeBleu(), [(code, [code]), (cand, ["q = 1", code]), ("os.getcwd()",
                                                                         ["os.getcwd()"])])
    assert got[0] == pytest.approx(1.0)
    direct = max(calc_codebleu([ref], [cand], lang="python")["codebleu"] for ref in ["q = 1", code])
    assert got[1] == pytest.approx(direct)
    # No data flow in a bare call: that component is 0, so even identical code stays below 0.75.
    no_flow = calc_codebleu(["os.getcwd()"], ["os.getcwd()"], lang="python")
    assert no_flow["dataflow_match_score"] == 0
    assert got[2] == pytest.approx(no_flow["codebleu"]) and got[2] <= 0.75


#: (reference, candidate) in each language the sandbox runs besides Python
OTHER_LANGUAGES = {
    "javascript": ("function area(w, h) {\n  const a = w * h;\n  return a;\n}\n",
                   "function area(w, h) {\n  return w + h;\n}\n"),
    "cpp": ("int area(int w, int h) {\n  int a = w * h;\n  return a;\n}\n",
            "int area(int w, int h) {\n  return w + h;\n}\n"),
    "java": ("class Shape {\n  int area(int w, int h) {\n    int a = w * h;\n    return a;\n"
             "  }\n}\n",
             "class Shape {\n  int area(int w, int h) {\n    return w + h;\n  }\n}\n"),
}


@pytest.mark.parametrize("language", sorted(OTHER_LANGUAGES))
def test_codebleu_scores_the_sandbox_s_other_languages_out_of_the_box(language):
    """Their grammars are dependencies (a study of JavaScript, C++ or Java rows runs without
    installing anything more): identical code scores 1, other code as the package scores it."""
    reference, candidate = OTHER_LANGUAGES[language]
    rows = frame([(reference, [reference]), (candidate, [reference])]).assign(language=language)
    with CodeBleu() as scorer:
        got = scorer.score(rows)[scorer.columns[0]].tolist()
    direct = calc_codebleu([reference], [candidate], lang=language)
    assert got[0] == pytest.approx(1.0)
    assert direct["dataflow_match_score"] > 0 and got[1] < 1
    assert got[1] == pytest.approx(direct["codebleu"])


def test_codebleu_names_the_grammar_version_to_install():
    """A grammar codebleu knows but that is not installed: the error says which version loads
    (``pip install tree-sitter-go`` alone would fetch one that tree-sitter 0.22 cannot load)."""
    missing = [lang for lang in AVAILABLE_LANGS
               if importlib.util.find_spec(f"tree_sitter_{lang}") is None]
    if not missing:
        pytest.skip("every grammar codebleu knows is installed here")
    rows = frame([("x = 1", ["x = 1"])]).assign(language=missing[0])
    wanted = f"pip install 'tree-sitter-{missing[0].replace('_', '-')}<0.23'"
    with CodeBleu() as scorer, pytest.raises(RuntimeError, match=re.escape(wanted)):
        scorer.score(rows)
    # the check that runs before any row is scored finds it, naming the row and field
    with CodeBleu() as scorer, pytest.raises(
            ValueError, match=r"row 0, field 'language': .*" + re.escape(wanted)):
        scorer.check(rows)


def test_codebleu_names_the_version_when_a_grammar_is_too_new(monkeypatch):
    """A grammar made for a later tree-sitter (from 0.23 its ``language()`` gives a capsule,
    which tree-sitter 0.22's Language rejects: "an integer is required") is not a crash in
    codebleu's depths but an error that says what to install."""
    too_new = types.ModuleType("tree_sitter_go")
    too_new.language = object
    monkeypatch.setitem(sys.modules, "tree_sitter_go", too_new)
    with pytest.raises(RuntimeError, match=r"the installed tree-sitter-go does not load in "
                       r"tree-sitter 0\.22 \(TypeError: .*pip install 'tree-sitter-go<0\.23'"):
        best_scores([["go", "x", ["x"]]], (0.25,) * 4, None)


def test_codebleu_unknown_language_is_an_error():
    rows = frame([("x", ["x"])]).assign(language="cobol")
    with pytest.raises(ValueError, match="does not support language 'cobol'"):
        CodeBleu().score(rows)
    rows = frame([("x", ["x"]), ("y", ["y"]), ("z", [])]).assign(language=["python", "", "rust"])
    with pytest.raises(ValueError, match=r"row 1, field 'language': codebleu does not support "
                       r"language ''"):
        CodeBleu().check(rows)
    CodeBleu().check(rows.iloc[[0, 2]])  # (a row without references is not scored)


def test_a_plain_data_frame_scores_as_its_record_would():
    """Scored directly (no validation first): references as numpy arrays (pd.read_parquet's
    lists), no language column (python, the record's default), the sandbox's names for a
    language (``py``): the values of the same rows read as records."""
    rows = pd.DataFrame({"task_id": ["t0", "t1"], "candidate": ["x = 1", "y"],
                         "references": [np.array(["x = 1"]), np.array(["z", "y"])]})
    with CodeBleu() as codebleu:
        expected = codebleu.score(frame([("x = 1", ["x = 1"]), ("y", ["z", "y"])]))
        pd.testing.assert_frame_equal(codebleu.score(rows), expected)
        pd.testing.assert_frame_equal(codebleu.score(rows.assign(language="py")), expected)
    assert EditSim().score(rows)["score.edit_sim"].tolist() == [1.0, 1.0]


def test_settings_are_checked():
    with pytest.raises(ValueError, match="valid settings: level"):
        EditSim(levle="token")
    with pytest.raises(ValueError, match="must be one of"):
        EditSim(level="word")
    assert Chrf(char_order="4").settings["char_order"] == 4
    assert Bleu(lowercase="true").settings["lowercase"] is True
    with pytest.raises(ValueError, match="expects int"):
        Chrf(char_order="four")
    with pytest.raises(ValueError, match="'chrf.char_order' expects int, got True"):
        Chrf(char_order=True)  # (a bool is an int to Python, not to a setting)
    with pytest.raises(ValueError, match="'rouge_l.beta' expects float, got False"):
        RougeL(beta=False)
    # values that would give NaN, inf, 0 or scores above 1 without a word
    for scorer, settings, message in (
            (Chrf, {"char_order": "0"}, "'chrf.char_order' must be at least 1"),
            (RougeL, {"beta": "nan"}, "'rouge_l.beta' must be a finite number"),
            (RougeL, {"beta": "inf"}, "'rouge_l.beta' must be a finite number"),
            (RougeL, {"beta": "-1"}, "'rouge_l.beta' must be at least 0"),
            (CodeBleu, {"weights": "nan,0.25,0.25,0.25"}, "sum to 1"),
            (CodeBleu, {"weights": "inf,0,0,0"}, "sum to 1"),
            (CodeBleu, {"weights": "2,2,2,2"}, "sum to 1")):
        with pytest.raises(ValueError, match=message):
            scorer(**settings)
    assert CodeBleu(weights="0.1,0.2,0.3,0.4").settings["weights"] == "0.1,0.2,0.3,0.4"


def test_signature_records_settings_and_versions():
    sig = Bleu(tokenize="13a").signature()
    assert sig.startswith("scorer:bleu|v:3|tokenize:13a|")
    assert "sacrebleu:" in sig and "effective_order:yes" in sig
    assert Bleu().signature() != sig


@pytest.fixture
def jetbrains(shared_data):
    path = shared_data / "conala-human-grades" / "conala" / "conala-all-grades.json"
    items = json.loads(path.read_text())
    systems = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")
    rows = [(item[s], item["snippet"], {m: item[f"{m}-{s}"] for m in ("chrf", "bleu", "rougel")})
            for item in items for s in systems]
    table = frame([(c, r) for c, r, _ in rows])
    published = pd.DataFrame([p for _, _, p in rows])
    return table, published


@pytest.mark.parametrize(("scorer", "column", "settings"), [
    ("chrf", "chrf", {}), ("rouge_l", "rougel", {}), ("bleu", "bleu", {"refs": "joint"})])
def test_agreement_with_published_jetbrains_values(jetbrains, scorer, column, settings):
    table, published = jetbrains
    (instance,) = build([scorer], {scorer: settings})
    with instance:
        ours = instance.score(table).iloc[:, 0].to_numpy()
    within = np.abs(ours - published[column].to_numpy()) <= 0.01
    assert len(ours) == 2360
    assert within.mean() >= 0.99, f"{scorer}: {within.mean():.3f} within 0.01"


def test_codebleu_does_not_depend_on_the_hash_seed(tmp_path):
    """The codebleu package's data-flow match iterates over sets; this pair scored 0.167 or
    0.222 on its data flow depending on PYTHONHASHSEED before scores moved to a fixed-seed
    worker."""
    import os
    import subprocess
    import sys

    script = tmp_path / "score.py"
    script.write_text(
        "import pandas as pd\n"
        "from hybridmetric.scorers.codebleu import CodeBleu\n"
        "ref = \"for (i, j) in product(list(range(256)), list(range(256))):\\n    pass\"\n"
        "frame = pd.DataFrame({'task_id': ['t'], 'candidate': ['for i in range(0, 256):'],\n"
        "                      'references': [[ref]], 'language': ['python']})\n"
        "with CodeBleu() as scorer:\n"
        "    print(repr(scorer.score(frame).iloc[0, 0]))\n")
    outputs = {
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(outputs) == 1, outputs


@pytest.mark.parametrize("scorer", [CodeBleu(max_chars=10), CodeBertScore(max_chars=10)],
                         ids=["codebleu", "codebertscore"])
def test_a_text_too_long_for_the_memory_it_takes_is_an_error_naming_its_row(scorer):
    """CodeBERTScore held ~8 KB a token (a 20 MB candidate would take ~100 GB) and codebleu ran
    out of 8 GB on one: the kernel's OOM killer then ends the run, naming nothing."""
    rows = frame([("x = 1", ["x = 1"]), ("x = 1", ["x = 1"])])
    with pytest.raises(ValueError, match="^row 1, field 'references': a text of 11 "
                                         "characters") as error:
        scorer.check(rows.assign(references=[["x = 1"], ["short", "x = 1000000"]]))
    assert f"more than {scorer.name}.max_chars (10)" in str(error.value)
    assert f"--set {scorer.name}.max_chars=N" in str(error.value)
    scorer.check(rows.assign(references=[["x = 1"], ["x = 10"]]))  # (10 characters: taken)
    scorer.close()


@pytest.mark.parametrize(("scorer", "reads_context"), [
    (CodeBleu(max_chars=10), False),
    (CodeBertScore(max_chars=10), True),
    (CodeBertScore(max_chars=10, use_context=False), False),
], ids=["codebleu", "codebertscore", "codebertscore-without-context"])
def test_only_the_texts_a_scorer_reads_are_held_to_its_length_limit(scorer, reads_context):
    """codebleu never reads a record's context, nor CodeBERTScore without ``use_context``: a
    long intent must not stop them (it did codebleu's)."""
    rows = frame([("x = 1", ["x = 1"]), ("x = 1", ["x = 1"])]).assign(
        context=["short", "a docstring of more than ten characters"])
    if reads_context:
        with pytest.raises(ValueError, match="^row 1, field 'context': a text of 39 characters"):
            scorer.check(rows)
    else:
        scorer.check(rows)
    with pytest.raises(ValueError, match="^row 1, field 'candidate': a text of 11 characters"):
        scorer.check(rows.assign(candidate=["x = 1", "x = 1000000"]))
    scorer.close()


def test_a_row_codebleu_cannot_score_is_an_error_naming_it():
    """Any error of codebleu's on a row (a MemoryError on a huge one) ended its worker, and the
    run said only "the codebleu worker died"; it names the row, and the worker goes on."""
    with pytest.raises(JobFailed) as failed:
        best_scores([None, ["python", "x = 1", ["x = 1"]], ["python", None, ["x = 1"]]],
                    [0.25] * 4, None)
    assert failed.value.index == 2
    scorer = CodeBleu()
    with scorer:
        bad = frame([("x = 1", ["x = 1"]), ("x = 1", ["x = 1"])])
        bad.loc[1, "candidate"] = None
        with pytest.raises(ValueError, match=r"^row 1: codebleu failed on it: \w+Error"):
            scorer.score(bad)
        again = scorer.score(frame([("x = 1", ["x = 1"])]))["score.codebleu"].tolist()
    assert again == [pytest.approx(calc_codebleu(["x = 1"], ["x = 1"], lang="python")["codebleu"])]


def test_the_codebleu_worker_ends_with_the_process_that_started_it(tmp_path):
    """Killed outright (SIGKILL), the caller closed nothing, and the worker ran its long job on
    to its end (an idle one ends with its input); it checks for its parent every second."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "caller.py"
    script.write_text(  # (20,000 rows: ~30 s of the worker's)
        "import pandas as pd\nfrom hybridmetric.scorers.codebleu import CodeBleu\n"
        "code = 'def f(x):\\n    y = [i * x for i in range(10)]\\n    return sum(y) + x\\n'\n"
        "rows = pd.DataFrame({'candidate': [code] * 20000, 'references': [[code]] * 20000})\n"
        "scorer = CodeBleu()\nprint(scorer._worker().pid, flush=True)\nscorer.score(rows)\n")
    caller = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    worker = int(caller.stdout.readline())
    time.sleep(2)  # (the request sent: the worker is busy with it)
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    for _ in range(100):
        try:  # (gone, or a zombie that its new parent has not reaped yet)
            if Path(f"/proc/{worker}/stat").read_text().split(") ")[1].startswith("Z"):
                break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        raise AssertionError("the worker outlived its caller by 10 s")
