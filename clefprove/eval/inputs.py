"""Input records (JSON objects) <-> encoded float64 vectors, per SPEC §2.

A record maps feature names to JSON values.  Missing features take their default; numbers are
clipped into ``[min, max]``; ``int`` features take whole numbers only (``3`` or ``3.0``, not
``3.5``); ``bool`` features take ``true``/``false`` only; categorical features take one of their
vocabulary strings.  A non-finite number, a value of the wrong type, an unknown categorical value
or an unknown feature name is an :class:`~clefprove.errors.InputError`, never a silent guess.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from clefprove.errors import InputError
from clefprove.model.ensemble import Ensemble
from clefprove.model.types import Feature, FeatureType, Model


def _short(v: Any, limit: int = 60) -> str:
    """``repr(v)``, cut short: an error line must not echo a multi-megabyte input."""
    text = repr(v[: limit + 1] if isinstance(v, str) else v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool | np.bool_):
        return "a boolean"
    if isinstance(v, str):
        return f"the string {_short(v)}"
    if isinstance(v, list | tuple):
        return "a list"
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, numbers.Number):
        return f"the number {_short(v)}"
    return f"a {type(v).__name__}"


def _number(f: Feature, v: Any) -> float:
    """Validate and clip a value for a numeric (int or float) feature."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real):
        raise InputError(f"{f.name}: expected a number, got {_describe(v)}")
    if isinstance(v, numbers.Integral):
        iv = int(v)
        # Compare exactly before converting: a huge int is finite and simply clips.
        if iv <= f.min:
            return f.min
        if iv >= f.max:
            return f.max
        return float(iv)
    x = float(v)
    if not math.isfinite(x):
        raise InputError(f"{f.name}: {x} is not a finite number")
    if f.type is FeatureType.INT and not x.is_integer():
        raise InputError(f"{f.name}: an int feature takes whole numbers, not {v!r}")
    return min(max(x, f.min), f.max)


def encode_value(f: Feature, v: Any) -> float:
    """The encoded float64 of one JSON value *v* for feature *f* (clipped into its domain)."""
    if f.type is FeatureType.BOOL:
        if not isinstance(v, bool | np.bool_):
            raise InputError(f"{f.name}: expected true or false, got {_describe(v)}")
        return 1.0 if v else 0.0
    if f.type is FeatureType.CATEGORICAL:
        if not isinstance(v, str):
            raise InputError(f"{f.name}: expected one of {_vocab(f)}, got {_describe(v)}")
        try:
            return float(f.values.index(v))
        except ValueError:
            raise InputError(
                f"{f.name}: unknown value {_short(v)} (expected one of {_vocab(f)})"
            ) from None
    return _number(f, v)


def _vocab(f: Feature) -> str:
    shown = ", ".join(repr(v) for v in f.values[:12])
    return "{" + shown + (", ..." if len(f.values) > 12 else "") + "}"


def value_encoder(f: Feature) -> Callable[[Any], float]:
    """A function equal to ``encode_value(f, v)``, with fast paths for plain JSON types."""
    lo, hi = f.min, f.max
    if f.type is FeatureType.CATEGORICAL:
        codes = {v: float(i) for i, v in enumerate(f.values)}

        def categorical(v: Any) -> float:
            code = codes.get(v) if type(v) is str else None
            return code if code is not None else encode_value(f, v)

        return categorical
    if f.type is FeatureType.BOOL:
        return lambda v: (1.0 if v else 0.0) if type(v) is bool else encode_value(f, v)
    whole = f.type is FeatureType.INT

    def number(v: Any) -> float:
        t = type(v)
        if t is float and math.isfinite(v) and (not whole or v.is_integer()):
            return lo if v < lo else hi if v > hi else v
        if t is int:  # compared exactly: a huge int simply clips
            return lo if v <= lo else hi if v >= hi else float(v)
        return _number(f, v)

    return number


class RecordEncoder:
    """Encodes records for one model; reusable (it caches the name -> index table)."""

    def __init__(self, model: Model | Ensemble) -> None:
        self.model = model
        self.features = model.features
        self.index = {f.name: i for i, f in enumerate(model.features)}
        self.default_list = [float(f.default) for f in model.features]
        self.encoders = [value_encoder(f) for f in model.features]

    def values(self, record: Any) -> list[float]:
        """The encoded values of *record* as a list (raises :class:`InputError`)."""
        if not isinstance(record, Mapping):
            raise InputError(f"an input must be a JSON object, got {_describe(record)}")
        out = self.default_list.copy()
        encoders, index = self.encoders, self.index
        for name, v in record.items():
            i = index.get(name) if isinstance(name, str) else None
            if i is None:
                raise InputError(self._unknown(name))
            out[i] = encoders[i](v)
        return out

    def encode_into(self, record: Any, out: np.ndarray) -> None:
        """Encode *record* into the float64 row *out* (raises :class:`InputError`)."""
        out[:] = self.values(record)

    def encode(self, record: Any) -> np.ndarray:
        return np.array(self.values(record), dtype=np.float64)

    def _unknown(self, name: Any) -> str:
        msg = f"unknown feature {_short(name)}"
        if isinstance(name, str):
            import difflib  # a suggestion, on an error only

            close = difflib.get_close_matches(name, list(self.index), n=1)
            if close:
                msg += f"; did you mean {close[0]!r}?"
        return msg


def encoder_for(model: Model) -> RecordEncoder:
    """The :class:`RecordEncoder` of *model* (built once, kept by the model)."""
    return model.derived.get(("eval.encoder",), lambda: RecordEncoder(model))


def encode_record(model: Model, record: Mapping[str, Any]) -> np.ndarray:
    """Encode one input record into a float64 vector (defaults filled, values clipped)."""
    return encoder_for(model).encode(record)


def encode_records(model: Model, records: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Encode records into an (n, n_features) float64 matrix; errors name the record index."""
    enc = encoder_for(model)
    rows = list(records)
    out = np.empty((len(rows), len(model.features)), dtype=np.float64)
    for i, rec in enumerate(rows):
        try:
            enc.encode_into(rec, out[i])
        except InputError as exc:
            raise InputError(f"record {i}: {exc}") from None
    return out


def parse_json_input(raw: bytes | str) -> Any:
    """Parse the JSON text of one input (or a JSON array of inputs), refusing what a lenient
    parser would guess at: invalid UTF-8, a key given twice, a giant integer, deep nesting.

    Raises :class:`InputError` with a one-line reason; the value's shape is not checked here.
    """
    from clefprove.model.source import DuplicateKeyError, unique_keys

    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("not valid UTF-8") from None
    # A BOM (line 1 of a file saved by some editors) and the line end are not JSON.
    text = raw.removeprefix("\ufeff").rstrip("\r\n")
    try:
        obj = json.loads(text)
        # Every key-value pair has a ':' outside strings, so fewer keys than ':' is the only way
        # a key can have been given twice; only then parse again, refusing duplicates.
        if _keys(obj) < text.count(":"):
            json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except DuplicateKeyError as exc:
        raise InputError(f"invalid JSON: {exc}") from None
    except ValueError as exc:  # an integer of more than 4300 digits (Python's conversion limit)
        raise InputError(f"invalid JSON: {str(exc).split(':')[0]}") from None
    except RecursionError:
        raise InputError("invalid JSON: nesting is too deep") from None
    return obj


def _keys(obj: Any) -> int:
    """Keys of an object, or of the objects of an array (what a duplicate could hide in)."""
    if isinstance(obj, dict):
        return len(obj)
    if isinstance(obj, list):
        return sum(len(o) for o in obj if isinstance(o, dict))
    return 0


def decode_input(model: Model, x: Iterable[float]) -> dict[str, Any]:
    """The JSON-ready record of an encoded input (int, float, bool or string per feature)."""
    values = x.tolist() if isinstance(x, np.ndarray) else list(x)
    if len(values) != len(model.features):
        raise InputError(f"expected {len(model.features)} values, got {len(values)}")
    return {f.name: f.decode(v) for f, v in zip(model.features, values, strict=True)}
