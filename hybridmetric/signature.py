"""Reproducibility signatures in the style of sacrebleu: ``key:value|key:value``.

Every number hybridmetric prints can be traced to one of these strings. Two runs with the same
signature on the same input give the same numbers.
"""

from __future__ import annotations

import itertools
import platform
import re
import sys
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def package_version(name: str) -> str:
    """Installed version of a distribution, or ``absent``."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


#: What a value escapes in a signature (with a backslash): the separator, the backslash itself
#: and line ends, so that a value (a column named ``a|content:0``) cannot end its field and
#: forge another, nor break the signature's line; and, as ``\\uXXXX`` (``\\UXXXXXXXX``
#: above U+FFFF), every other character that ``repr`` escapes (see :func:`visible`).
_ESCAPED = {"\\": "\\", "|": "|", "\n": "n", "\r": "r"}
_ESCAPE = str.maketrans({char: "\\" + code for char, code in _ESCAPED.items()})
_UNESCAPED = {code: char for char, code in _ESCAPED.items()}
#: The hex digits after ``\\u`` and ``\\U``.
_CODE_DIGITS = {"u": 4, "U": 8}
_HEX = re.compile("[0-9a-f]+")


def visible(text: str, keep: str = "") -> str:
    """``text`` with every character that ``repr`` would escape (a control character, a bidi
    override, a zero-width space, an unassigned code point) but those in ``keep`` written as
    ``\\uXXXX`` (``\\UXXXXXXXX`` above U+FFFF), so that no name can reorder, hide or fake what
    is shown around it (a metric named ``"ab\\u202ecd"`` shows as ``ab\\u202ecd``)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in keep
                   else f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"
                   for char in text)


def say(text: str, keep: str = "\t") -> None:
    """Write ``text``, a note for the person running the command, to standard error, its names
    shown as themselves (:func:`visible`; tabs kept): a note is one line, which a name cannot
    break (its line end shows as ``\\u000a``). ``keep``: what else shows as it is (an error's
    own line ends: ``"\\t\\n"``)."""
    print(visible(text, keep=keep), file=sys.stderr)


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    text = repr(value) if isinstance(value, float) else str(value)
    return visible(text.translate(_ESCAPE))


def signature(fields: Mapping[str, Any]) -> str:
    """Join ``fields`` in their given order as ``key:value|...`` (see :data:`_ESCAPED`)."""
    return "|".join(f"{key}:{format_value(value)}" for key, value in fields.items())


def parse(text: str) -> dict[str, str]:
    """The ``key:value`` fields of a signature, each value as it was given to
    :func:`format_value` (its escapes undone; ``yes``, ``none`` and numbers as text)."""
    items: list[str] = []
    item: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            code = next(chars, "")  # (a backslash that ends the text stays one)
            if code in _CODE_DIGITS:
                digits = "".join(itertools.islice(chars, _CODE_DIGITS[code]))
                if len(digits) != _CODE_DIGITS[code] or not _HEX.fullmatch(digits):
                    raise ValueError(f"a signature's \\{code} escape takes {_CODE_DIGITS[code]} "
                                     f"hex digits, not {digits!r}: the signature was altered")
                item.append(chr(int(digits, 16)))
            else:
                item.append(_UNESCAPED.get(code, "\\" + code))
        elif char == "|":
            items.append("".join(item))
            item = []
        else:
            item.append(char)
    items.append("".join(item))
    return dict(entry.partition(":")[::2] for entry in items)


def changed(a: str, b: str) -> list[str]:
    """The fields two signatures give different values (or only one of them gives), sorted."""
    first, second = parse(a), parse(b)
    return sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))


def environment(packages: Iterable[str] = ()) -> dict[str, str]:
    """hybridmetric's, Python's and the named packages' versions, for a signature."""
    fields = {"hybridmetric": package_version("hybridmetric"), "python": platform.python_version()}
    for name in packages:
        fields[name] = package_version(name)
    return fields
