"""One trace as a tree of spans, for people (indented lines) and for machines (nested JSON).

A span is a record as ragmesh_common.span_file writes it (Tempo's spans are read into the same
shape): service, name, kind, trace_id, span_id, parent_id, start_ns, end_ns, status, attributes.
Children are ordered by start time. A span whose parent is not among the spans (still being
exported, or rotated out of the span file) is shown at the top level and marked, never dropped.
The JSON holds every span; the lines leave out the ASGI middleware's per-message spans unless asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HEADER = "  start ms  duration ms  status  service / operation"


@dataclass
class SpanNode:
    span: dict[str, Any]
    parent_missing: bool = False
    children: list["SpanNode"] = field(default_factory=list)

    @property
    def start_ns(self) -> int:
        return int(self.span.get("start_ns") or 0)

    @property
    def end_ns(self) -> int:
        return int(self.span.get("end_ns") or self.start_ns)


class SpanTree:
    def __init__(self, trace_id: str, request_id: str, spans: list[dict[str, Any]]) -> None:
        self.trace_id, self.request_id = trace_id, request_id
        nodes: dict[str, SpanNode] = {}
        for span in spans:
            nodes.setdefault(span["span_id"], SpanNode(span))  # a span read twice counts once
        self.roots: list[SpanNode] = []
        for node in nodes.values():
            parent_id = node.span.get("parent_id")
            if parent_id and parent_id in nodes:
                nodes[parent_id].children.append(node)
            else:
                node.parent_missing = bool(parent_id)
                self.roots.append(node)
        for node in nodes.values():
            node.children.sort(key=_start_order)
        self.roots.sort(key=_start_order)
        self.span_count = len(nodes)
        self.start_ns = min((n.start_ns for n in nodes.values()), default=0)
        self.end_ns = max((n.end_ns for n in nodes.values()), default=0)

    @property
    def duration_ms(self) -> float:
        return _ms(self.end_ns - self.start_ns)

    def services(self) -> list[str]:
        return sorted({str(node.span.get("service")) for node, _ in self._walk(self.roots, 0)})

    def lines(self, *, every_span: bool = False) -> list[str]:
        """The tree, one line per span. The ASGI middleware's spans for each message sent or
        received (``asgi.event.type``: one per streamed chunk) are left out unless ``every_span``;
        the first line says how many."""
        shown = [(node, depth) for node, depth in self._walk(self.roots, 0)
                 if every_span or not _is_asgi_message(node)]
        header = f"trace {self.trace_id}  request {self.request_id or '-'}  {self.span_count} spans  " \
                 f"{self.duration_ms:.1f} ms"
        if len(shown) < self.span_count:
            header += f"  ({self.span_count - len(shown)} ASGI send/receive spans not shown; --all shows them)"
        out = [header, HEADER]
        for node, depth in shown:
            span = node.span
            status = "ERROR" if span.get("status") == "ERROR" else "ok"
            line = (f"{_ms(node.start_ns - self.start_ns):>10.1f}  {_ms(node.end_ns - node.start_ns):>11.1f}  "
                    f"{status:<6}  {'  ' * depth}{span.get('service')}  {str(span.get('kind', '')).lower()}  "
                    f"{span.get('name')}")
            error_type = (span.get("attributes") or {}).get("error.type")
            if status == "ERROR" and error_type:
                line += f"  error.type={error_type}"
            if node.parent_missing:
                line += "  (parent span not recorded)"
            out.append(line)
        return out

    def as_json(self) -> dict[str, Any]:
        return {"trace_id": self.trace_id, "request_id": self.request_id, "span_count": self.span_count,
                "duration_ms": self.duration_ms, "services": self.services(),
                "spans": [self._node_json(node) for node in self.roots]}

    def _node_json(self, node: SpanNode) -> dict[str, Any]:
        span = node.span
        out: dict[str, Any] = {
            "service": span.get("service"), "operation": span.get("name"), "kind": span.get("kind"),
            "status": span.get("status") or "UNSET", "span_id": span["span_id"],
            "parent_id": span.get("parent_id"), "parent_missing": node.parent_missing,
            "start_ms": _ms(node.start_ns - self.start_ns), "duration_ms": _ms(node.end_ns - node.start_ns),
            "attributes": span.get("attributes") or {},
        }
        if span.get("status_message"):
            out["status_message"] = span["status_message"]
        out["children"] = [self._node_json(child) for child in node.children]
        return out

    @staticmethod
    def _walk(nodes: list[SpanNode], depth: int):
        for node in nodes:
            yield node, depth
            yield from SpanTree._walk(node.children, depth + 1)


def _is_asgi_message(node: SpanNode) -> bool:
    return not node.children and "asgi.event.type" in (node.span.get("attributes") or {})


def _start_order(node: SpanNode) -> tuple[int, str]:
    return node.start_ns, str(node.span.get("name"))


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)
