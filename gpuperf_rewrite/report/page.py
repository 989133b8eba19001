"""The page around the charts: one HTML file, its style inline, no script and nothing fetched.

Every string that comes from a document (script paths, messages, stderr, diffs) goes through
:func:`esc`; only the SVG that matplotlib wrote (whose own text it escapes) is inserted as is.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;
 padding:1em 1.5em;color:#1d1d1f;background:#fff}
h1{font-size:1.35em;margin:.2em 0}h2{font-size:1.1em;margin:1.6em 0 .4em;border-bottom:1px solid #ddd}
.verdict{font-size:1.15em;padding:.6em .8em;border-radius:6px;background:#f3f3f3;border-left:6px solid #888}
.good{border-color:#2e8b57;background:#eef8f1}.bad{border-color:#c0392b;background:#fbeeee}
.neutral{border-color:#b8860b;background:#fdf8e8}
.numbers{display:flex;flex-wrap:wrap;gap:.5em 1.6em;margin:.6em 0}.numbers div b{display:block;font-size:1.2em}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:12px;white-space:pre-wrap;word-break:break-word}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;
 vertical-align:top}th{background:#f3f3f3}.missing{color:#777;font-style:italic}
svg{max-width:100%;height:auto}.note{color:#555;font-size:.92em}footer{margin-top:2em;color:#888;font-size:.85em}
.sev{display:inline-block;height:.7em;background:#c0392b;margin-right:.4em}
"""


def esc(value: Any) -> str:
    """``value`` as text safe inside HTML (quotes too: it may end up in an attribute)."""
    return html.escape(str(value), quote=True)


@dataclass
class Page:
    """A page being built: a title, the verdict block, then sections in order."""

    title: str
    kind: str
    parts: list[str] = field(default_factory=list)

    def verdict(self, text: str, tone: str, numbers: Mapping[str, str] | None = None) -> None:
        """The headline: ``text`` in words (as the text report says it), then the numbers."""
        nums = "".join(f'<div><b id="num-{esc(k.lower().replace(" ", "-"))}">{esc(v)}</b>{esc(k)}</div>'
                       for k, v in (numbers or {}).items())
        self.parts.append(f'<p class="verdict {esc(tone)}" id="verdict">{esc(text)}</p>'
                          + (f'<div class="numbers">{nums}</div>' if nums else ""))

    def section(self, anchor: str, heading: str, *body: str) -> None:
        self.parts.append(f'<section id="{esc(anchor)}"><h2>{esc(heading)}</h2>{"".join(body)}</section>')

    def render(self) -> str:
        from gpuperf_rewrite import __version__

        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                # Nothing outside the file, ever: a CI artifact or a file on disk opens the same.
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                "style-src 'unsafe-inline'; img-src data:\">"
                f"<title>{esc(self.title)}</title><style>{CSS}</style></head>"
                f"<body data-kind=\"{esc(self.kind)}\"><h1>{esc(self.title)}</h1>"
                + "".join(self.parts)
                + f"<footer>gpuperf-rewrite {esc(__version__)} report; charts drawn with matplotlib "
                  "(static SVG, nothing fetched).</footer></body></html>\n")


def _attr(name: str, value: str) -> str:
    """`` name="value"`` (escaped), or nothing for an empty value."""
    return f' {name}="{esc(value)}"' if value else ""


def pre(text: str, anchor: str = "") -> str:
    return f"<pre{_attr('id', anchor)}>{esc(text)}</pre>"


def para(text: str, cls: str = "") -> str:
    return f"<p{_attr('class', cls)}>{esc(text)}</p>"


def missing(what: str) -> str:
    """Say that the document has no data for a part of the page (never an empty chart)."""
    return f'<p class="missing">{esc(what)}</p>'


def chart(svg: str, caption: str = "") -> str:
    """An SVG from :func:`gpuperf_rewrite.report.charts.to_svg` (trusted: matplotlib escapes its text)."""
    caption_html = f'<figcaption class="note">{esc(caption)}</figcaption>' if caption else ""
    return f"<figure>{svg}{caption_html}</figure>"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], anchor: str = "", raw: bool = False) -> str:
    """A table of escaped cells (``raw``: cells are already HTML, built by the caller from escaped parts)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{_attr('id', anchor)}><tr>{head}</tr>{body}</table>"


def plain(value: Any) -> str:
    """A value of a document key the page does not know, in a table cell."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        import json

        text = json.dumps(value, default=str)
        return text if len(text) <= 300 else text[:300] + "..."
    return "" if value is None else str(value)


def key_values(doc: Mapping[str, Any], anchor: str = "") -> str:
    """Every key of ``doc`` and its value: how the page shows objects it has no chart for
    (``overhead``, a ``plan`` of a newer shape), so that no key is lost."""
    return table(("key", "value"), ((k, plain(v)) for k, v in doc.items()), anchor)
