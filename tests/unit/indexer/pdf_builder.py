"""Writes a minimal valid PDF with a real text layer (Helvetica, one text line per Tj).

Used to generate tests/fixtures/mixed_corpus/manual.pdf (``python tests/unit/indexer/pdf_builder.py``)
and by tests that need a PDF with chosen text. No PDF library can author text, so the objects and
the cross-reference table are written by hand.
"""

from __future__ import annotations

from pathlib import Path

FIXTURE_PAGES = [
    [
        "Ragmesh Operator Manual",
        "The indexer scans a corpus and records a manifest entry for every file.",
        "Each chunk keeps the page it came from so citations can open it.",
        "",
        "Rollback restores the previous index version in one step.",
    ],
    [
        "Appendix: Ports",
        "The retrieval service listens on port 50051 by default.",
        "The indexer service listens on port 50054 by default.",
    ],
]


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def minimal_pdf(pages: list[list[str]], title: str = "") -> bytes:
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for lines in pages:
        page_id = 4 + len(objects) - 3
        stream = ["BT", "/F1 12 Tf", "16 TL", "72 740 Td"]
        for line in lines:
            stream.append(f"({_escape(line)}) Tj T*" if line else "T*")
        stream.append("ET")
        content = "\n".join(stream).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
            f" /Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    info_id = None
    if title:
        objects.append(f"<< /Title ({_escape(title)}) >>".encode("latin-1"))
        info_id = len(objects)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    info = f" /Info {info_id} 0 R" if info_id else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


if __name__ == "__main__":
    target = Path(__file__).resolve().parents[2] / "fixtures" / "mixed_corpus" / "manual.pdf"
    target.write_bytes(minimal_pdf(FIXTURE_PAGES, title="Ragmesh Operator Manual"))
    print(f"wrote {target}")
