"""The answer text as an OpenAI client reads it: each ``[S1]`` marker becomes a Markdown link to its
source, ``[S1](https://host/api/rag/v1/source/...#L12)``, and each link is a ``url_citation``
annotation (``message.annotations``, typed by the official SDKs) whose ``start_index`` and
``end_index`` are the link's character offsets in the content.

Why links rather than bare markers or sentence spans: a chat UI that renders Markdown (Open WebUI,
LibreChat) shows each citation as a clickable ``S1``, a plain-text client still sees where it
points, and a client that reads annotations gets the url and title without parsing the text, as
OpenAI's own cited answers give them (inline links, annotations over them). The link text stays
the source id, so ``ragmesh.sources[].source_id`` still names what each link cites.

Offsets count Unicode code points (Python ``str`` indices), from the start of the whole content,
across stream chunks; ``end_index`` is exclusive (``content[start_index:end_index]`` is the link).
An annotation is only made against the text it indexes and is refused when it falls outside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ragmesh_gateway.openai_chat.schemas import Annotation, UrlCitation

# The markers the generator writes: [S1], [S1, S2] (chat.service reads them the same way).
_MARKER = re.compile(r"\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]")
# A marker cut by a stream boundary ("... [S", "... [S1, S"): held back until the rest arrives.
_UNFINISHED_MARKER = re.compile(r"\[\s*(?:S\d*(?:\s*[,;]\s*(?:S\d*)?)*)?\s*\Z")
_SOURCE_ID = re.compile(r"S\d+")
# A link this module wrote, in an earlier assistant message a client sends back: its marker again.
_LINK = re.compile(r"\[(S\d+)\]\([^)\s]*\)")

# source id -> (title, absolute url); None: no such source (the marker is dropped).
SourceLookup = Callable[[str], "tuple[str, str] | None"]


def url_citation(piece: str, start: int, end: int, *, title: str, url: str, offset: int = 0) -> Annotation:
    """The annotation of ``piece[start:end]``, where ``piece`` follows ``offset`` characters of content
    already sent; refused (ValueError) when the span is not inside the piece."""
    if not 0 <= start < end <= len(piece):
        raise ValueError(f"citation span {start}-{end} is outside its text ({len(piece)} characters)")
    return Annotation(url_citation=UrlCitation(url=url, title=title, start_index=offset + start,
                                               end_index=offset + end))


def markers_of_links(text: str) -> str:
    """``[S1](url)`` back to ``[S1]``: an earlier answer, as the client sends it back in messages."""
    return _LINK.sub(r"[\1]", text)


@dataclass(frozen=True, slots=True)
class CitedText:
    text: str
    annotations: list[Annotation]


@dataclass
class CitationLinker:
    """Feed answer text in (whole, or piece by piece as it streams); take out the text with its
    markers as links and the annotations of those links, offsets counted from the first piece."""

    lookup: SourceLookup
    _offset: int = 0  # characters of content handed out so far
    _held: str = ""  # an unfinished marker at the end of the last piece
    _count: int = 0

    @property
    def annotations_so_far(self) -> int:
        return self._count

    def feed(self, text: str) -> CitedText:
        text = self._held + text
        held = _UNFINISHED_MARKER.search(text)
        self._held = text[held.start():] if held else ""
        return self._render(text[: held.start()] if held else text)

    def finish(self) -> CitedText:
        """What is still held back (a marker the stream never finished is kept as text)."""
        text, self._held = self._held, ""
        self._offset += len(text)
        return CitedText(text, [])

    def _render(self, text: str) -> CitedText:
        out: list[str] = []
        length = 0  # characters of ``out``
        annotations: list[Annotation] = []
        spans: list[tuple[int, int, str, str]] = []
        last = 0
        for marker in _MARKER.finditer(text):
            out.append(text[last:marker.start()])
            length += marker.start() - last
            last = marker.end()
            first = True
            for source_id in dict.fromkeys(_SOURCE_ID.findall(marker.group(0))):
                found = self.lookup(source_id)
                if found is None:
                    continue  # a marker naming no source of this answer links nowhere: dropped
                title, url = found
                if not first:
                    out.append(", ")
                    length += 2
                first = False
                link = f"[{source_id}]({_link_target(url)})"
                spans.append((length, length + len(link), title, url))
                out.append(link)
                length += len(link)
        out.append(text[last:])
        rendered = "".join(out)
        for start, end, title, url in spans:
            # Checked against the piece it is sent with, then counted from the start of the content
            # (the pieces before it are exactly ``_offset`` characters).
            annotations.append(url_citation(rendered, start, end, title=title, url=url, offset=self._offset))
        self._offset += len(rendered)
        self._count += len(annotations)
        return CitedText(rendered, annotations)


def _link_target(url: str) -> str:
    """A url as a Markdown link target: what would end the target early is percent-encoded."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def render_whole(text: str, lookup: SourceLookup) -> CitedText:
    linker = CitationLinker(lookup)
    piece, rest = linker.feed(text), linker.finish()
    return CitedText(piece.text + rest.text, piece.annotations)
