"""Features and actions as JSON (SPEC §2): parsed with JSON-path error messages, and written
back.  Shared by the JSON source (:mod:`clefprove.model.source`) and the `.clef` metadata
(:mod:`clefprove.model.clef`), so neither imports the other.
"""

from __future__ import annotations

import math
from typing import Any

from clefprove.errors import ModelSourceError
from clefprove.model.types import MAX_ACTIONS, MAX_FEATURES, MAX_VOCABULARY, Feature, FeatureType

_FEATURE_KEYS = {
    FeatureType.INT: {"name", "type", "min", "max", "default", "description"},
    FeatureType.FLOAT: {"name", "type", "min", "max", "default", "description"},
    FeatureType.BOOL: {"name", "type", "default", "description"},
    FeatureType.CATEGORICAL: {"name", "type", "values", "default", "description"},
}


#: A run of at least this many equal path segments is written once with its count.
_RUN = 4


def _short_path(path: str) -> str:
    """*path* with runs of one segment collapsed: ``tree.right.right.right.right`` is
    ``tree(.right x4)``, so that an error deep in a tree stays one short line."""
    parts = path.split(".")
    out: list[str] = []
    i = 0
    while i < len(parts):
        j = i
        while j < len(parts) and parts[j] == parts[i]:
            j += 1
        n = j - i
        if n >= _RUN and i > 0:
            out[-1] += f"(.{parts[i]} x{n})"
        else:
            out.extend(parts[i:j])
        i = j
    return ".".join(out)


def _fail(path: str, message: str) -> ModelSourceError:
    return ModelSourceError(f"{_short_path(path)}: {message}" if path else message)


def _is_number(v: Any) -> bool:
    # (a tuple, not ``int | float``: the same test without building a union per call)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_keys(obj: dict[str, Any], allowed: set[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            raise _fail(path, f"unknown key '{key}' (expected one of {', '.join(sorted(allowed))})")


def _require(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise _fail(path, f"missing '{key}'")
    return obj[key]


def _finite(v: Any, path: str, what: str) -> float:
    if not _is_number(v):
        raise _fail(path, f"{what} must be a number, not {_json_type(v)}")
    try:
        x = float(v)
    except OverflowError:
        digits = str(v)
        if len(digits) > 24:  # one readable line: a 4,000-digit integer is not printed whole
            digits = f"{digits[:12]}...({len(digits.lstrip('-'))} digits)"
        raise _fail(path, f"{what} {digits} is too large for float64") from None
    if not math.isfinite(x):
        raise _fail(path, f"{what} must be finite, not {v}")
    return x


def has_control_characters(text: str) -> bool:
    """Whether *text* holds a control character (a terminal escape, a NUL, a line break)."""
    return any(c < " " or "\x7f" <= c < "\xa0" for c in text)


def unprintable(text: str) -> str | None:
    """What makes *text* unfit to be printed by ``info``, ``check`` and the reports, or None:
    a control character (a terminal escape), or a lone surrogate (JSON's ``"\\ud800"``: not
    Unicode text, it has no UTF-8 encoding, so every report that wrote it failed, exit 4)."""
    if has_control_characters(text):
        return "a control character"
    if any("\ud800" <= c <= "\udfff" for c in text):
        return "a lone surrogate (not Unicode text)"
    return None


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return "a number"


#: Names that the invariant language always reads as the decision (docs/dsl.md, "Names").
RESERVED_FEATURE_NAMES = frozenset({"action", "confidence"})


def check_name_clashes(features: tuple[Feature, ...], actions: tuple[str, ...]) -> None:
    """Refuse a feature named like one of the model's actions: ``action == block`` could not
    tell the action from the feature."""
    acts = set(actions)
    for i, f in enumerate(features):
        if f.name in acts:
            raise _fail(
                f"features[{i}].name",
                f"'{f.name}' is also an action name; invariants could not tell the feature "
                "from the action; rename one of them",
            )


#: The keys of the plainest float feature, the one :func:`_plain_float` reads.
_PLAIN_FLOAT_KEYS = frozenset({"name", "type", "min", "max", "default"})


def _plain_float(obj: dict[str, Any]) -> Feature | None:
    """:func:`parse_feature` of a float feature with exactly the keys name, type, min, max and
    default, each bound a float (or an int within +-2**53), finite, min <= default <= max,
    and a valid name: the Feature the full route builds (tests/model check it), without
    its checks one by one; None for anything else (the full route then decides, and words
    any error)."""
    if obj.keys() != _PLAIN_FLOAT_KEYS or obj["type"] != "float":
        return None
    name, lo, hi, d = obj["name"], obj["min"], obj["max"], obj["default"]
    if type(name) is not str or not name.isidentifier() or name in RESERVED_FEATURE_NAMES:
        return None
    bounds: list[float] = []
    for v in (lo, hi, d):
        if type(v) is int and -(2**53) <= v <= 2**53:
            v = float(v)
        elif type(v) is not float or not math.isfinite(v):
            return None
        bounds.append(v)
    lo, hi, d = bounds
    if not lo <= d <= hi:
        return None
    return Feature(name, FeatureType.FLOAT, lo, hi, d)


def parse_feature(obj: Any, path: str) -> Feature:
    """Validate one feature declaration (JSON form) into an encoded :class:`Feature`."""
    if type(obj) is dict and len(obj) == 5:
        plain = _plain_float(obj)
        if plain is not None:
            return plain
    if not isinstance(obj, dict):
        raise _fail(path, f"a feature must be an object, not {_json_type(obj)}")
    name = _require(obj, "name", path)
    if not isinstance(name, str) or not name:
        raise _fail(f"{path}.name", "must be a non-empty string")
    if not name.isidentifier():
        raise _fail(f"{path}.name", f"'{name}' is not a valid feature name (letters, digits, _)")
    if name in RESERVED_FEATURE_NAMES:
        raise _fail(
            f"{path}.name",
            f"'{name}' is reserved: invariants read '{name}' as the model's decision, "
            "so a feature of that name could never be referred to; rename the feature",
        )
    raw_type = _require(obj, "type", path)
    try:
        ftype = FeatureType(raw_type)
    except ValueError:
        raise _fail(
            f"{path}.type", f"unknown feature type {raw_type!r} (int, float, bool, categorical)"
        ) from None
    _check_keys(obj, _FEATURE_KEYS[ftype], path)
    default = _require(obj, "default", path)
    if ftype is FeatureType.BOOL:
        if not isinstance(default, bool):
            raise _fail(f"{path}.default", f"a bool default must be true or false, not {default!r}")
        return Feature(name, ftype, 0.0, 1.0, float(default))
    if ftype is FeatureType.CATEGORICAL:
        values = _require(obj, "values", path)
        if not isinstance(values, list) or not values:
            raise _fail(f"{path}.values", "must be a non-empty list of strings")
        if len(values) > MAX_VOCABULARY:
            raise _fail(f"{path}.values", f"more than {MAX_VOCABULARY} values")
        seen: set[str] = set()
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise _fail(f"{path}.values[{i}]", f"must be a string, not {_json_type(v)}")
            problem = unprintable(v)
            if problem is not None:
                # It would be printed raw by info, check and report: a terminal escape.
                raise _fail(f"{path}.values[{i}]", f"{v!r} holds {problem}")
            if v in seen:
                raise _fail(f"{path}.values[{i}]", f"duplicate value '{v}'")
            seen.add(v)
        if not isinstance(default, str) or default not in seen:
            raise _fail(f"{path}.default", f"{default!r} is not one of the feature's values")
        return Feature(
            name, ftype, 0.0, float(len(values) - 1), float(values.index(default)), tuple(values)
        )
    lo = _finite(_require(obj, "min", path), f"{path}.min", "min")
    hi = _finite(_require(obj, "max", path), f"{path}.max", "max")
    d = _finite(default, f"{path}.default", "default")
    if lo > hi:
        raise _fail(path, f"min {obj['min']} is greater than max {obj['max']}")
    if ftype is FeatureType.INT:
        for key, v in (("min", lo), ("max", hi), ("default", d)):
            if not v.is_integer():
                raise _fail(f"{path}.{key}", f"an int feature needs a whole number, not {obj[key]}")
            # Compare the JSON integer itself: float() would round 2**53 + 1 into range.
            if abs(v) > 2**53 or abs(obj[key]) > 2**53:
                raise _fail(f"{path}.{key}", "int bounds must lie within +-2**53")
    if not lo <= d <= hi:
        raise _fail(
            f"{path}.default", f"{default} is outside the domain [{obj['min']}, {obj['max']}]"
        )
    return Feature(name, ftype, lo, hi, d)


def parse_features(raw: Any, path: str = "features") -> tuple[Feature, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "must be a non-empty list of features")
    if len(raw) > MAX_FEATURES:
        raise _fail(path, f"more than {MAX_FEATURES} features")
    features: list[Feature] = []
    names: dict[str, int] = {}
    for i, obj in enumerate(raw):
        f = parse_feature(obj, f"{path}[{i}]")
        if f.name in names:
            raise _fail(f"{path}[{i}].name", f"duplicate feature name '{f.name}'")
        names[f.name] = i
        features.append(f)
    return tuple(features)


def parse_actions(raw: Any, path: str = "actions") -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "must be a non-empty list of action names")
    if len(raw) > MAX_ACTIONS:
        raise _fail(path, f"more than {MAX_ACTIONS} actions")
    seen: set[str] = set()
    for i, a in enumerate(raw):
        if not isinstance(a, str) or not a.isidentifier():
            raise _fail(f"{path}[{i}]", f"{a!r} is not a valid action name (letters, digits, _)")
        if a in seen:
            raise _fail(f"{path}[{i}]", f"duplicate action '{a}'")
        seen.add(a)
    return tuple(raw)


def feature_to_json(f: Feature) -> dict[str, Any]:
    """The JSON source form of a feature (inverse of :func:`parse_feature`)."""
    out: dict[str, Any] = {"name": f.name, "type": str(f.type)}
    if f.type is FeatureType.CATEGORICAL:
        out["values"] = list(f.values)
        out["default"] = f.values[int(f.default)]
    elif f.type is FeatureType.BOOL:
        out["default"] = bool(f.default)
    elif f.type is FeatureType.INT:
        out.update(min=int(f.min), max=int(f.max), default=int(f.default))
    else:
        out.update(min=f.min, max=f.max, default=f.default)
    return out
