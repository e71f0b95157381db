"""The HTML view of a corpus file a citation opens: every line numbered, the cited ones marked.

The file is untrusted text: it is HTML-escaped line by line and never interpreted, so an HTML page
in a corpus shows as its source. The page carries no script; the browser scrolls the cited lines
into view by the link's fragment (``#L12``), and the marked lines keep a margin above them.
"""

from __future__ import annotations

import html
import re

from ragmesh_common.errors import ErrorCode, RagmeshError

MAX_LINE_SPAN = 100_000
_LINES = re.compile(r"^([1-9]\d{0,5})(?:-([1-9]\d{0,5}))?$")

_STYLE = """
body{margin:0;font:14px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#1f2328;background:#fff}
header{position:sticky;top:0;background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:8px 16px;
 font-family:system-ui,sans-serif}
header a{margin-left:12px}
ol{margin:0;padding:8px 0 40vh 0;list-style:none;counter-reset:none}
li{display:flex;white-space:pre-wrap;word-break:break-word;scroll-margin-top:30vh}
li .n{flex:0 0 4.5em;text-align:right;padding-right:1em;color:#6e7781;user-select:none}
li.cited{background:#fff8c5}
li.cited .n{color:#1f2328;font-weight:bold}
"""


def parse_lines(value: str | None) -> tuple[int, int] | None:
    """``"12"`` or ``"12-18"``; None when absent. Anything else is INVALID_ARGUMENT."""
    if value is None or value == "":
        return None
    match = _LINES.match(value.strip())
    if not match:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "lines must look like 12 or 12-18")
    start = int(match.group(1))
    end = int(match.group(2) or start)
    if end < start or end - start > MAX_LINE_SPAN:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "lines must be a range from a smaller to a larger number")
    return start, end


def render_source_view(*, title: str, text: str, raw_url: str, cited: tuple[int, int] | None) -> str:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first, last = cited or (0, -1)
    items = []
    for number, line in enumerate(lines, 1):
        mark = ' class="cited"' if first <= number <= last else ""
        items.append(f'<li id="L{number}"{mark}><span class="n">{number}</span>'
                     f'<span class="t">{html.escape(line, quote=False)}</span></li>')
    shown = f"lines {first}–{min(last, len(lines))}" if cited else "whole file"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><meta name=\"viewport\" content=\"width=device-width\">"
        f"<style>{_STYLE}</style></head><body>"
        f"<header><strong>{html.escape(title)}</strong> · <span class=\"range\">{shown}</span>"
        f"<a class=\"raw\" href=\"{html.escape(raw_url)}\">raw file</a></header>"
        f"<ol>{''.join(items)}</ol></body></html>\n"
    )
