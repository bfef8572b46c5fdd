"""The scorer registry, settings from the command line, and entry-point discovery."""

from __future__ import annotations

import pytest

from hybridmetric import scorers as registry
from hybridmetric.cli import main
from hybridmetric.scorers.base import Setting


def test_builtins_are_listed_and_load():
    names = registry.available()
    for name in ("bleu", "chrf", "codebleu", "edit_sim", "exact_match", "rouge_l"):
        assert name in names
        assert registry.get(name).name == name


def test_unknown_scorer_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown scorer 'chrff'; available scorers: .*chrf"):
        registry.get("chrff")


def test_parse_settings():
    assert registry.parse_settings(["edit_sim.level=token", "chrf.beta=3"],
                                   ["edit_sim", "chrf"]) == {
        "edit_sim": {"level": "token"}, "chrf": {"beta": "3"}}
    with pytest.raises(ValueError, match="SCORER.KEY=VALUE"):
        registry.parse_settings(["edit_sim=token"], ["edit_sim"])
    with pytest.raises(ValueError, match="scorer 'bleu' is not selected"):
        registry.parse_settings(["bleu.smooth=none"], ["edit_sim"])


def test_a_setting_without_default_is_unset_by_none_null_or_nothing():
    setting = Setting(None, "a file", kind=str)
    for text in ("none", "NULL", "", " None "):
        assert setting.parse("baseline", text) is None
    assert setting.parse("baseline", "b.csv") == "b.csv"
    assert Setting("none", "a word").parse("smooth", "none") == "none"  # a value of its own


def test_a_bad_setting_names_its_scorer_and_alias():
    with pytest.raises(ValueError, match=r"setting 'edit_sim.level' must be one of \['char', "
                                         r"'token'\], got 'bogus' \(the scorer edit_sim as a\)"):
        registry.build(["a=edit_sim"], {"a": {"level": "bogus"}})
    with pytest.raises(ValueError, match=r"'bleu.smooth_value' applies to smooth=floor or add-k"):
        registry.build(["bleu"], {"bleu": {"smooth_value": "0.5"}})
    for value in ("-1", "0"):
        with pytest.raises(ValueError, match=r"'bleu.smooth_value' must be above 0"):
            registry.build(["bleu"], {"bleu": {"smooth": "add-k", "smooth_value": value}})
    (bleu,) = registry.build(["bleu"], {"bleu": {"smooth": "floor", "smooth_value": "0.5"}})
    assert bleu.pair("a b c d", "a b x y") > 0


def test_entry_point_discovery(plugin_dir, monkeypatch, capsys, tmp_path):
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert registry.available()["length_ratio"] == "hm_plugin_demo:LengthRatio"
    (scorer,) = registry.build(["length_ratio"], {"length_ratio": {"delay": "0"}})
    assert scorer.settings == {"delay": 0.0, "log": ""}
    assert main(["scorers"]) == 0
    assert "length_ratio  (hm_plugin_demo:LengthRatio)" in capsys.readouterr().out
    data = tmp_path / "g.jsonl"
    data.write_text('{"task_id": "t", "candidate": "abcd", "references": ["ab"]}\n')
    out = tmp_path / "s.jsonl"
    assert main(["score", str(data), "-o", str(out), "--scorers", "length_ratio,edit_sim",
                 "--no-progress"]) == 0
    assert '"score.length_ratio": 2.0' in out.read_text()


BROKEN = '''
import pandas as pd
from hybridmetric.scorers import Scorer


class WrongColumns(Scorer):
    name = "wrong_columns"

    def score(self, frame):
        return pd.DataFrame({"score.other": [0.5] * len(frame)}, index=frame.index)


class Boom(Scorer):
    name = "boom"

    def score(self, frame):
        return 1 / 0


class NoInit(Scorer):
    name = "no_init"

    def __init__(self, **settings):
        raise TypeError("needs a model path")

    def score(self, frame):
        return frame


class BadCheck(Scorer):
    name = "bad_check"

    def check(self, frame):
        frame["no_such_field"]

    def score(self, frame):
        return frame


class OwnIndex(Scorer):
    name = "own_index"

    def score(self, frame):
        return pd.DataFrame({"score.own_index": [0.5] * len(frame)})
'''


def test_a_broken_third_party_scorer_is_named(plugin_dir, monkeypatch, capsys, tmp_path):
    """A scorer that cannot be loaded, returns other columns or fails is named, with how to
    fix it, never a bare traceback; the other scorers are still listed."""
    (plugin_dir / "hm_broken.py").write_text(BROKEN)
    (plugin_dir / "hm_plugin_demo-1.0.dist-info" / "entry_points.txt").write_text(
        "[hybridmetric.scorers]\nlength_ratio = hm_plugin_demo:LengthRatio\n"
        "wrong_columns = hm_broken:WrongColumns\nboom = hm_broken:Boom\n"
        "no_init = hm_broken:NoInit\nbad_check = hm_broken:BadCheck\n"
        "own_index = hm_broken:OwnIndex\ngone = hm_no_such_module:Gone\n")
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert main(["scorers"]) == 2
    out, err = capsys.readouterr()
    assert "length_ratio  (hm_plugin_demo:LengthRatio)" in out and "edit_sim" in out
    assert "the scorer hm_no_such_module:Gone cannot be loaded (ModuleNotFoundError" in err
    data = tmp_path / "g.jsonl"
    data.write_text('{"task_id": "t", "candidate": "abcd", "references": ["ab"]}\n' * 3)
    for name, said in (
            ("wrong_columns", "returned the columns ['score.other'], not ['score.wrong_columns']"),
            ("boom", "the scorer boom (hm_broken.Boom) failed in score: ZeroDivisionError"),
            ("no_init", "the scorer no_init (hm_broken.NoInit) could not be made: TypeError"),
            ("bad_check", "the scorer bad_check (hm_broken.BadCheck) failed in check: KeyError"),
            ("own_index", "returned an index of its own ([0]...), not the rows' ([1]...)"),
            ("gone", "fix or uninstall the package that registers it")):
        code = main(["score", str(data), "-o", str(tmp_path / f"{name}.jsonl"), "--scorers",
                     name, "--no-progress", "--chunk-size", "1"])
        assert code == 2 and said in capsys.readouterr().err, name


def test_cli_reports_bad_settings(capsys, tmp_path):
    data = tmp_path / "g.jsonl"
    data.write_text('{"task_id": "t", "candidate": "x", "references": ["x"]}\n')
    code = main(["score", str(data), "-o", str(tmp_path / "s.jsonl"), "--scorers", "edit_sim",
                 "--set", "edit_sim.levl=token"])
    assert code == 2
    assert "scorer 'edit_sim' has no setting ['levl']; valid settings: level" in (
        capsys.readouterr().err)


def test_alias_runs_one_scorer_twice(tmp_path):
    data = tmp_path / "g.jsonl"
    data.write_text('{"task_id": "t", "candidate": "a = b+1", "references": ["a=c + 1"]}\n')
    settings = registry.parse_settings(["tok.level=token"], ["edit_sim", "tok=edit_sim"])
    from hybridmetric import score
    table = score(data, registry.build(["edit_sim", "tok=edit_sim"], settings), progress=False)
    assert table["score.tok"].tolist() == [0.8]
    assert table["score.edit_sim"].iloc[0] < 0.8
    tok = registry.build(["tok=edit_sim"], settings)[0]
    assert tok.signature().startswith("scorer:edit_sim|v:1|as:tok|level:token|")
    with pytest.raises(ValueError, match="ALIAS=SCORER"):
        registry.build(["=edit_sim"])


def test_a_shortcut_no_selected_scorer_takes_is_refused(tmp_path, capsys):
    """--device and --allow-network, as a --set for an unselected scorer, would do nothing."""
    data = tmp_path / "g.jsonl"
    data.write_text('{"task_id": "t", "candidate": "x = 1", "references": ["x = 1"]}\n')
    for flag in (["--device", "cpu"], ["--allow-network"]):
        code = main(["score", str(data), "-o", str(tmp_path / "s.jsonl"), "--scorers",
                     "exact_match", *flag, "--no-progress"])
        assert code == 2 and f"{flag[0]}: no selected scorer takes it" in capsys.readouterr().err
    assert not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize(("entry", "message"), [
    ("hybrid=chrf", r"the alias 'hybrid' is taken \(score\.hybrid is the hybrid metric's"),
    ("pass=exact_match", r"the alias 'pass' is taken \(score\.pass is the verdict"),
    ("bleu=chrf", r"the alias 'bleu' is taken \(score\.bleu is the bleu scorer's column\)"),
])
def test_an_alias_that_would_pass_for_another_column_is_refused(entry, message):
    with pytest.raises(ValueError, match=message):
        registry.split_name(entry)
    assert registry.split_name("cbs_nl=codebertscore") == ("cbs_nl", "codebertscore")
    assert registry.split_name("bleu") == ("bleu", "bleu")
