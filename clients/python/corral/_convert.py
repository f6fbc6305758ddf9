"""Turning the API's JSON into the models (models.py) and back."""
from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from typing import Any, Dict

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: str) -> datetime:
    """Parses an RFC 3339 time as the server writes it (up to nanoseconds, Z or an offset)."""
    s = value.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    # Python before 3.11 reads at most 6 fractional digits.
    s = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], s, count=1)
    t = datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def format_time(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.isoformat().replace("+00:00", "Z")


def convert(spec: str, value: Any) -> Any:
    """Converts a JSON value by a field's spec (see gen_models.py)."""
    if value is None:
        return None
    if spec.startswith("opt:"):
        return convert(spec[4:], value)
    if spec.startswith("list:"):
        return [convert(spec[5:], v) for v in value]
    if spec.startswith("map:"):
        return {k: convert(spec[4:], v) for k, v in value.items()}
    if spec.startswith("ref:"):
        from .models import MODELS

        return MODELS[spec[4:]].from_dict(value)
    if spec == "datetime":
        return parse_time(value)
    if spec == "float" and isinstance(value, int):
        return float(value)
    return value


def unconvert(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, list):
        return [unconvert(v) for v in value]
    if isinstance(value, dict):
        return {k: unconvert(v) for k, v in value.items()}
    return value


class Model:
    """The base of the generated models: from_dict and to_dict."""

    _FIELDS: tuple = ()

    @classmethod
    def from_dict(cls, data: Dict[str, Any]):
        """Builds the model from the API's JSON object; unknown keys go to extra."""
        if not isinstance(data, dict):
            raise TypeError("%s: want a JSON object, got %r" % (cls.__name__, type(data).__name__))
        kwargs: Dict[str, Any] = {}
        known = set()
        for py, js, spec in cls._FIELDS:
            known.add(js)
            kwargs[py] = convert(spec, data.get(js))
        obj = cls(**kwargs)
        obj.extra = {k: v for k, v in data.items() if k not in known}
        return obj

    def to_dict(self) -> Dict[str, Any]:
        """The model as the API's JSON object (fields that are None left out)."""
        out: Dict[str, Any] = dict(self.extra)
        for py, js, _ in self._FIELDS:
            v = getattr(self, py)
            if v is not None:
                out[js] = unconvert(v)
        return out

    @classmethod
    def field_names(cls) -> Dict[str, str]:
        """The API's field names, to the Python attribute names."""
        return {js: py for py, js, _ in cls._FIELDS}


def is_model(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and isinstance(obj, Model)
