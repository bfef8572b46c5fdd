"""Reproducibility signatures in the style of sacrebleu: ``key:value|key:value``.

Every number hybridmetric prints can be traced to one of these strings. Two runs with the same
signature on the same input give the same numbers.
"""

from __future__ import annotations

import platform
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
#: forge another, nor break the signature's line.
_ESCAPED = {"\\": "\\", "|": "|", "\n": "n", "\r": "r"}
_ESCAPE = str.maketrans({char: "\\" + code for char, code in _ESCAPED.items()})
_UNESCAPED = {code: char for char, code in _ESCAPED.items()}


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return (repr(value) if isinstance(value, float) else str(value)).translate(_ESCAPE)


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
