"""``report.md``: the report's text and tables in GitHub-flavoured Markdown (figures stay in HTML).

Text from the data is escaped (CommonMark backslash escapes), so a name can neither break a table
nor inject markup, and what would not show as itself (a bidi override, a control character) shows
as its code.
"""

from __future__ import annotations

import re

from hybridmetric.report.document import Code, Plot, Section
from hybridmetric.report.tables import Table
from hybridmetric.signature import visible

_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!$])")


def escape(text: str) -> str:
    """``text`` as literal Markdown: special characters backslash-escaped, newlines as spaces."""
    return _SPECIAL.sub(r"\\\1", " ".join(visible(text, keep="\t\n\r").splitlines()))


def _fenced(text: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    text = visible(text, keep="\t\n\r")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return f"{fence}\n{text}\n{fence}"


def _table(table: Table) -> str:
    lines = [f"### {escape(table.title)}", "",
             "| " + " | ".join(escape(c) for c in table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    lines.extend("| " + " | ".join(escape(cell.text) for cell in row) + " |" for row in table.rows)
    if table.note:
        lines.extend(["", f"*{escape(table.note)}*"])
    return "\n".join(lines)


def _section(section: Section) -> str:
    parts = [f"## {escape(section.title)}"]
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(_table(block))
        elif isinstance(block, Plot):
            parts.append(f"*Figure (in report.html): {escape(block.caption)}*")
        elif isinstance(block, Code):
            parts.append(f"{escape(block.label)}:\n\n{_fenced(block.text)}")
        else:
            parts.append(escape(block))
    return "\n\n".join(parts)


def render(title: str, headline: str, sections: list[Section], signature: str) -> str:
    """The whole Markdown document as a string."""
    parts = [f"# {escape(title)}"]
    if headline:
        parts.append(f"**{escape(headline)}**")
    parts.extend(_section(section) for section in sections)
    parts.append(f"---\n\nSignature:\n\n{_fenced(signature)}")
    return "\n\n".join(parts) + "\n"
