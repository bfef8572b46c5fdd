"""Signatures: escaping that no value can forge a field with, and what no name may hide."""

from __future__ import annotations

import pytest

from hybridmetric.signature import changed, parse, say, signature, visible


def test_visible_writes_what_would_not_show_as_its_code() -> None:
    assert visible("plain café 模型") == "plain café 模型"
    # a bidi override, a zero-width space, NUL, DEL, a C1 control, an astral format character
    assert visible("a\u202eb\u200bc\x00d\x7fe\x85f\U000e0001") == (
        "a\\u202eb\\u200bc\\u0000d\\u007fe\\u0085f\\U000e0001")
    assert visible("tab\tand\nline") == "tab\\u0009and\\u000aline"
    assert visible("tab\tand\nline", keep="\t\n") == "tab\tand\nline"


def test_every_value_comes_back_from_its_signature() -> None:
    given = {"rlo": "exe.\u202egnp", "nul": "a\x00b", "tab": "a\tb", "astral": "\U000e0001x",
             "back": "\\u202e", "lines": "x\r\ny|z", "text": "naïve 模型"}
    text = signature(given)
    assert text == ("rlo:exe.\\u202egnp|nul:a\\u0000b|tab:a\\u0009b|astral:\\U000e0001x"
                    "|back:\\\\u202e|lines:x\\r\\ny\\|z|text:naïve 模型")
    assert text.isprintable()
    assert parse(text) == given
    assert changed(text, signature({**given, "rlo": "exe.png"})) == ["rlo"]


@pytest.mark.parametrize("altered", ["a:\\u12", "a:\\u12g4", "a:\\U0000e00", "a:x\\u"])
def test_a_broken_code_is_an_error(altered: str) -> None:
    with pytest.raises(ValueError, match="hex digits.*the signature was altered"):
        parse(altered)


def test_a_note_shows_names_as_their_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """say: a note on standard error, one line, its tabs kept, every other character that would
    not show as itself written as its code (a line end too: a name cannot fake a second line);
    an error keeps its own line ends where asked."""
    say("metric ab\u202ecd\tleft out\nhybridmetric: note: (x\u200by)")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("metric ab\\u202ecd\tleft out\\u000ahybridmetric: note: "
                            "(x\\u200by)\n")
    say("error: two\nlines\u202e", keep="\t\n")
    assert capsys.readouterr().err == "error: two\nlines\\u202e\n"
