"""``report.html``: one self-contained page (inline CSS, PNG figures as data URIs, no scripts).

Every piece of text from the data (metric, system, feature names, settings) is HTML-escaped,
and what would not show as itself (a bidi override, a control character) shows as its code.
"""

from __future__ import annotations

import base64
import html
import re

from hybridmetric.report.document import Code, Plot, Section
from hybridmetric.report.tables import Table
from hybridmetric.signature import visible

_ESTIMATE = re.compile(r"^(\S+) (\[[^\]]+\])$")  # "0.412 [0.380, 0.441]"

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1d1d1f; background: #ffffff; margin: 0; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.3em; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 2px solid #e4e4e7; padding-bottom: 4px; }
h3 { font-size: 1.02em; margin: 1.2em 0 0.4em; }
nav { font-size: 0.92em; margin-bottom: 1em; }
nav a { margin-right: 1em; color: #1f5fa8; text-decoration: none; }
.headline { font-size: 1.08em; background: #f4f7fb; border-left: 4px solid #1f5fa8;
  padding: 10px 14px; }
section.prominent { background: #fff8e6; border: 2px solid #e0a800; border-radius: 8px;
  padding: 4px 18px 12px; margin-top: 1.6em; }
section.prominent h2 { border-bottom-color: #e0a800; }
table { border-collapse: collapse; margin: 0.3em 0 0.2em; font-size: 0.9em; }
div.table { max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #d4d4d8; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #f4f4f5; }
td { font-variant-numeric: tabular-nums; }
td.good { background: #dcf5dc; }
td.muted { color: #8a8a8f; }
span.ci { white-space: nowrap; color: #55555a; }
p { overflow-wrap: anywhere; }
.note { font-size: 0.82em; color: #55555a; margin: 0 0 1em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ececef; }
figcaption { font-size: 0.85em; color: #55555a; }
footer { margin-top: 2.5em; font-size: 0.82em; color: #55555a; }
code.signature { display: block; white-space: pre-wrap; word-break: break-all;
  background: #f4f4f5; padding: 8px 10px; border-radius: 4px; }
"""


def escape(text: str) -> str:
    """``text`` as HTML that shows it as it is (see :func:`hybridmetric.signature.visible`)."""
    return html.escape(visible(text, keep="\t\n\r"))


def _cell_text(text: str) -> str:
    """Escaped cell text; an estimate's CI may wrap to a new line but never inside itself."""
    match = _ESTIMATE.match(text)
    if match is None:
        return escape(text)
    return f'{escape(match[1])} <span class="ci">{escape(match[2])}</span>'


def _table(table: Table) -> str:
    head = "".join(f"<th>{escape(column)}</th>" for column in table.columns)
    body = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{cell.style}">{_cell_text(cell.text)}</td>' if cell.style
            else f"<td>{_cell_text(cell.text)}</td>"
            for cell in row
        )
        body.append(f"<tr>{cells}</tr>")
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    # (in a box as wide as the page, which scrolls a wider table: one column per metric)
    return (f'<h3>{escape(table.title)}</h3>\n<div class="table"><table><thead><tr>{head}</tr>'
            f"</thead><tbody>{''.join(body)}</tbody></table></div>\n{note}")


def _plot(plot: Plot) -> str:
    data = base64.b64encode(plot.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(plot.alt)}">'
            f"<figcaption>{escape(plot.caption)}</figcaption></figure>")


def _section(section: Section) -> str:
    parts = [f'<section id="{section.anchor}"'
             + (' class="prominent">' if section.prominent else ">"),
             f"<h2>{escape(section.title)}</h2>"]
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(_table(block))
        elif isinstance(block, Plot):
            parts.append(_plot(block))
        elif isinstance(block, Code):
            parts.append(f"<p>{escape(block.label)}:</p>"
                         f'<code class="signature">{escape(block.text)}</code>')
        else:
            parts.append(f"<p>{escape(block)}</p>")
    parts.append("</section>")
    return "\n".join(parts)


def render(title: str, headline: str, sections: list[Section], signature: str) -> str:
    """The whole page as a string."""
    nav = " ".join(f'<a href="#{s.anchor}">{escape(s.title)}</a>' for s in sections)
    lead = f'<p class="headline">{escape(headline)}</p>' if headline else ""
    body = "\n".join(_section(section) for section in sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<h1>{escape(title)}</h1>
<nav>{nav}</nav>
{lead}
{body}
<footer><p>Signature (every number above is reproduced by a run with this signature on the same
input):</p><code class="signature">{escape(signature)}</code></footer>
</main>
</body>
</html>
"""
