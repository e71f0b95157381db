"""TEI's own OpenAPI document (vendored in tests/conformance/tei/) as JSON Schemas to validate against.

The document is OpenAPI 3.0 as utoipa writes it: ``nullable: true`` instead of a null type, and
``example``/``default`` values written as strings ("null", "true"). Only ``nullable`` changes what
validates; the rest is annotation and is dropped.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[2] / "conformance" / "tei" / "openapi.json"
_ANNOTATIONS = {"example", "default", "description", "format"}


@functools.cache
def document() -> dict[str, Any]:
    return json.loads(SPEC_PATH.read_text(encoding="utf-8"))


def as_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: as_json_schema(value) for key, value in node.items() if key not in _ANNOTATIONS}
    if converted.pop("nullable", False):
        if "type" in converted:
            converted["type"] = [converted["type"], "null"]
        else:  # a $ref or a combinator: null is one more alternative
            return {"anyOf": [converted, {"type": "null"}]}
    return converted


@functools.cache
def _registry() -> Registry:
    converted = as_json_schema({"components": document()["components"]})
    return Registry().with_resource("tei", Resource(contents=converted, specification=DRAFT202012))


def schema_of(name: str) -> dict[str, Any]:
    return {"$ref": f"tei#/components/schemas/{name}"}


def validate_against(name: str, instance: Any) -> None:
    """Raise jsonschema.ValidationError unless ``instance`` is a valid TEI ``name``."""
    jsonschema.Draft202012Validator(schema_of(name), registry=_registry()).validate(instance)


def request_schema(path: str) -> str:
    """The component name of the JSON body TEI's ``POST path`` takes."""
    ref = document()["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return ref.rsplit("/", 1)[-1]
