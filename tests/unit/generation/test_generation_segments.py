"""SegmentBuffer: where streamed text may be cut for verification, whatever the chunking."""

from __future__ import annotations

import pytest

from ragmesh_generation.segments import SegmentBuffer


def segment(text: str, step: int) -> tuple[list[str], str]:
    buffer = SegmentBuffer()
    segments: list[str] = []
    for start in range(0, len(text), step):
        segments += buffer.feed(text[start:start + step])
    last, tail = buffer.finish()
    return segments + last, tail


CASES = [
    ("Foo bar [S1]. Baz qux [S2]. Thanks!", ["Foo bar [S1].", " Baz qux [S2]."], " Thanks!"),
    # A citation after the full stop belongs to the sentence before it.
    ("Foo [S1]. [S2] Bar [S3].", ["Foo [S1]. [S2]", " Bar [S3]."], ""),
    # ... and so does one after the full stop of a sentence not cited before it: the extractive
    # runtime writes "unit. [S1] unit. [S2]", and a unit of two sentences must not be cut in two
    # (its first half would be checked against the previous unit's source).
    ("Foo. [S1] Bar. [S2]", ["Foo. [S1]", " Bar. [S2]"], ""),
    ('One. [S1] In "x," said B. Then "y" said C. [S2]', ["One. [S1]", ' In "x," said B. Then "y" said C. [S2]'], ""),
    ('He said "yes." [S1] Next. [S2]', ['He said "yes." [S1]', " Next. [S2]"], ""),
    ("Use e.g. [S1] now. [S2]", ["Use e.g. [S1] now. [S2]"], ""),
    # The extractive runtime's table rows have no full stop: the marker ends the unit, so the next
    # unit's first sentence is not checked against this unit's source.
    ("`a` — Default: 8 [S1] `b` — Default: 9 [S1] Tern is small. It runs [S3]",
     ["`a` — Default: 8 [S1]", " `b` — Default: 9 [S1]", " Tern is small. It runs [S3]"], ""),
    ("Port 8080 [S2] and more [S2].", ["Port 8080 [S2] and more [S2]."], ""),
    ("According to [S1], it is 8 [S1].", ["According to [S1], it is 8 [S1]."], ""),
    ("Foo.[S1] Bar。[S2]", ["Foo.[S1]", " Bar。[S2]"], ""),
    # Uncited sentences wait for the cited one that covers them.
    ("Intro. More intro. Claim [S1].", ["Intro. More intro. Claim [S1]."], ""),
    ("Intro:\n- one [S1]\n- two [S2]\n\nDone [S1]", ["Intro:\n- one [S1]", "\n- two [S2]", "\n\nDone [S1]"], ""),
    # No cut inside a quotation, nor after an abbreviation or a decimal point.
    ('He said "a. b. c." and more [S1]. Next [S2].', ['He said "a. b. c." and more [S1].', " Next [S2]."], ""),
    ("Use e.g. foo [S1]. Version 3.5 works [S2].", ["Use e.g. foo [S1].", " Version 3.5 works [S2]."], ""),
    # No cut inside a fenced code block, whatever it contains.
    ("Run [S1]:\n```\na. b. [S2]\n```\nAfter [S3].", ["Run [S1]:", "\n```\na. b. [S2]\n```\nAfter [S3]."], ""),
    ("中文句子[S1]。第二句[S2]。", ["中文句子[S1]。", "第二句[S2]。"], ""),
    ("Foo [S1][S2]. Bar [S1, S3].", ["Foo [S1][S2].", " Bar [S1, S3]."], ""),
    ("INSUFFICIENT_EVIDENCE", [], "INSUFFICIENT_EVIDENCE"),
    ("No citation at all.", [], "No citation at all."),
    # An unfinished marker at the very end is not a citation.
    ("Claim [S1]. Dangling [S", ["Claim [S1]."], " Dangling [S"),
    # A quotation mark that never closes does not hide the citation behind it.
    ('A 5" pipe fits [S1]. It is steel [S2].', ['A 5" pipe fits [S1].', " It is steel [S2]."], ""),
]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize(("text", "segments", "tail"), CASES)
def test_segments_do_not_depend_on_chunking(text: str, segments: list[str], tail: str, step: int) -> None:
    got_segments, got_tail = segment(text, step)
    assert got_segments == segments
    assert got_tail == tail
    assert "".join(got_segments) + got_tail == text


def test_a_segment_is_released_before_the_stream_ends() -> None:
    buffer = SegmentBuffer()
    assert buffer.feed("First claim [S1].") == []  # a [S2] may still follow the full stop
    assert buffer.feed(" Second") == ["First claim [S1]."]
    assert buffer.pending == " Second"


def test_a_sentence_without_citation_is_held_back() -> None:
    buffer = SegmentBuffer()
    assert buffer.feed("Uncited claim. And another one. ") == []
    assert buffer.feed("Cited [S1]. x") == ["Uncited claim. And another one. Cited [S1]."]


def test_long_uncited_output_is_scanned_in_linear_time() -> None:
    buffer = SegmentBuffer()
    for _ in range(20_000):
        assert buffer.feed("word. ") == []
    segments, tail = buffer.finish()
    assert segments == [] and len(tail) == 120_000
