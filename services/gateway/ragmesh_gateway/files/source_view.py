"""The HTML view of a corpus file a citation opens: every line numbered, the cited ones marked.

The file is untrusted text: it is HTML-escaped line by line and never interpreted, so an HTML page
in a corpus shows as its source. The page carries no script; the browser scrolls the cited lines
into view by the link's fragment (``#L12``). It reads right without its stylesheet too (nginx's
``default-src 'none'`` blocks inline styles): lines sit in a ``<pre>``, numbered in the text,
and the cited ones are ``<mark>``, which browsers highlight by default.
"""

from __future__ import annotations

import html
import re

from ragmesh_common.errors import ErrorCode, RagmeshError

MAX_LINE_SPAN = 100_000
# Published in the OpenAPI document too, so clients (and schemathesis) know what a range looks like.
LINES_PATTERN = r"^[1-9][0-9]{0,5}(-[1-9][0-9]{0,5})?$"
_LINES = re.compile(r"^([1-9]\d{0,5})(?:-([1-9]\d{0,5}))?$")

_STYLE = """
body{margin:0;font:14px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#1f2328;background:#fff}
header{position:sticky;top:0;background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:8px 16px;
 font-family:system-ui,sans-serif}
header a{margin-left:12px}
pre{margin:0;padding:8px 0 40vh 0;font:inherit;white-space:pre-wrap;word-break:break-word}
.line{scroll-margin-top:30vh}
.n{color:#6e7781;user-select:none}
mark.cited{display:inline-block;width:100%;background:#fff8c5;color:inherit}
mark.cited .n{color:#1f2328;font-weight:bold}
"""


def parse_lines(value: str | None) -> tuple[int, int] | None:
    """``"12"`` or ``"12-18"``; None when absent. Anything else is INVALID_ARGUMENT."""
    if value is None or value == "":
        return None
    match = _LINES.match(value.strip())
    if not match:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "lines must look like 12 or 12-18")
    # Any two line numbers the published pattern allows name a range: "18-12" marks 12-18, and a
    # span beyond MAX_LINE_SPAN marks its first MAX_LINE_SPAN lines. A view is harmless either way,
    # and a request the OpenAPI document allows is never refused.
    start, end = sorted((int(match.group(1)), int(match.group(2) or match.group(1))))
    return start, min(end, start + MAX_LINE_SPAN)


def render_source_view(*, title: str, text: str, raw_url: str, cited: tuple[int, int] | None) -> str:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first, last = cited or (0, -1)
    items = []
    width = len(str(len(lines)))
    for number, line in enumerate(lines, 1):
        tag, css = ("mark", "line cited") if first <= number <= last else ("span", "line")
        items.append(f'<{tag} id="L{number}" class="{css}"><span class="n">{number:>{width}}  </span>'
                     f'<span class="t">{html.escape(line, quote=False)}</span></{tag}>')
    shown = f"lines {first}–{min(last, len(lines))}" if cited else "whole file"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><meta name=\"viewport\" content=\"width=device-width\">"
        '<link rel="icon" type="image/svg+xml" href="/widget/favicon.svg">'
        f"<style>{_STYLE}</style></head><body>"
        f"<header><strong>{html.escape(title)}</strong> · <span class=\"range\">{shown}</span>"
        f"<a class=\"raw\" href=\"{html.escape(raw_url)}\">raw file</a></header>"
        f"<pre>{chr(10).join(items)}</pre></body></html>\n"
    )
