"""Importers for trained models (ONNX-ML, XGBoost, LightGBM): each reads its library's file
format without unpickling anything and produces a :class:`~clefprove.model.types.Model` through
:func:`~clefprove.model.source.compile_source` (docs/importers.md)."""

from __future__ import annotations

import os
from collections.abc import Callable

from clefprove.model.ensemble import Ensemble
from clefprove.model.importers.common import FeatureSpec, read_feature_spec
from clefprove.model.types import Model

FORMATS = ("onnx", "xgboost", "lightgbm")


def importer(
    fmt: str,
) -> Callable[[str | os.PathLike[str], FeatureSpec | None], Model | Ensemble]:
    """The import function for *fmt* (one of :data:`FORMATS`)."""
    if fmt == "onnx":
        from clefprove.model.importers.onnx import import_onnx

        return import_onnx
    if fmt == "xgboost":
        from clefprove.model.importers.xgboost import import_xgboost

        return import_xgboost
    if fmt == "lightgbm":
        from clefprove.model.importers.lightgbm import import_lightgbm

        return import_lightgbm
    raise ValueError(fmt)


def import_model(
    fmt: str, path: str | os.PathLike[str], features: str | os.PathLike[str] | None = None
) -> Model | Ensemble:
    """Import the trained model in *path* (format *fmt*), with an optional features spec."""
    spec = read_feature_spec(features) if features is not None else None
    return importer(fmt)(path, spec)


__all__ = ["FORMATS", "FeatureSpec", "import_model", "importer", "read_feature_spec"]
