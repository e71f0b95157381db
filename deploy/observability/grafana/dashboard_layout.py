"""Grafana dashboard layout: panels placed on the 24-column grid, with ragmesh's defaults.

Used by build_dashboards.py, which holds what the dashboards show.
"""

from __future__ import annotations

from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE_WINDOW = "$__rate_interval"


def quantile(q: float, histogram: str, by: str = "", selector: str = "") -> str:
    """PromQL for the q-quantile of a histogram, kept apart by the labels in ``by``."""
    labels = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({histogram}_bucket{selector}[{RATE_WINDOW}])))"


class DashboardBuilder:
    """Lays panels out on Grafana's 24-column grid, left to right, row by row."""

    def __init__(self, uid: str, title: str, description: str) -> None:
        self.uid, self.title, self.description = uid, title, description
        self.panels: list[dict[str, Any]] = []
        self._x = 0
        self._y = 0
        self._row_height = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y},
                "panels": [],
            }
        )
        self._y += 1

    def timeseries(
        self,
        title: str,
        description: str,
        targets: list[tuple[str, str]],
        unit: str,
        *,
        width: int = 8,
        exemplars: bool = False,
        stacked: bool = False,
    ) -> None:
        custom: dict[str, Any] = {"fillOpacity": 10, "showPoints": "never"}
        if stacked:
            custom["stacking"] = {"mode": "normal", "group": "A"}
        self._add(
            {
                "type": "timeseries",
                "title": title,
                "description": description,
                "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
                "options": {
                    "legend": {
                        "displayMode": "table",
                        "placement": "bottom",
                        "calcs": ["lastNotNull", "max"],
                    },
                    "tooltip": {"mode": "multi", "sort": "desc"},
                },
                "targets": [
                    {
                        "refId": chr(ord("A") + i),
                        "datasource": DATASOURCE,
                        "expr": expr,
                        "legendFormat": legend,
                        "range": True,
                        "exemplar": exemplars,
                    }
                    for i, (expr, legend) in enumerate(targets)
                ],
            },
            width,
            8,
        )

    def stat(self, title: str, description: str, expr: str, unit: str, *, width: int = 6) -> None:
        self._add(
            {
                "type": "stat",
                "title": title,
                "description": description,
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
                "targets": [{"refId": "A", "datasource": DATASOURCE, "expr": expr, "instant": True}],
            },
            width,
            4,
        )

    def table(self, title: str, description: str, expr: str, columns: list[str], *, width: int = 12) -> None:
        keep = {name: False for name in ("Time", "Value", "__name__", "job", "instance", "service")}
        keep.update({name: True for name in columns})
        self._add(
            {
                "type": "table",
                "title": title,
                "description": description,
                "fieldConfig": {"defaults": {}, "overrides": []},
                "options": {"showHeader": True},
                "transformations": [
                    {"id": "organize", "options": {"excludeByName": {k: not v for k, v in keep.items()}}}
                ],
                "targets": [
                    {
                        "refId": "A",
                        "datasource": DATASOURCE,
                        "expr": expr,
                        "format": "table",
                        "instant": True,
                    }
                ],
            },
            width,
            8,
        )

    def build(self, variables: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["ragmesh"],
            "editable": False,
            "timezone": "browser",
            "schemaVersion": 39,
            "version": 1,
            "refresh": "30s",
            "time": {"from": "now-3h", "to": "now"},
            "templating": {"list": [datasource_variable(), *variables]},
            "annotations": {"list": []},
            "links": [
                {"title": "ragmesh dashboards", "type": "dashboards", "tags": ["ragmesh"], "asDropdown": True}
            ],
            "panels": self.panels,
        }

    def _add(self, panel: dict[str, Any], width: int, height: int) -> None:
        if self._x + width > 24:
            self._newline()
        panel["id"] = len(self.panels) + 1
        panel["datasource"] = DATASOURCE
        panel["gridPos"] = {"h": height, "w": width, "x": self._x, "y": self._y}
        self.panels.append(panel)
        self._x += width
        self._row_height = max(self._row_height, height)

    def _newline(self) -> None:
        self._y += self._row_height
        self._x = 0
        self._row_height = 0


def datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": "Prometheus", "value": "prometheus"},
        "hide": 0,
    }


def query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
        "hide": 0,
    }
