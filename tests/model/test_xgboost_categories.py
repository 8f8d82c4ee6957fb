"""XGBoost models trained on pandas ``category`` columns record their categories (3.1+,
``cats.enc``): the import names the values after them (and only them: ``predict`` on a
DataFrame sends an unrecorded category where no code goes), decides as ``predict`` on a
DataFrame does (categories matched by name), and refuses a spec whose vocabulary would give
the codes other names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clefprove.errors import ImportModelError
from clefprove.eval.ensemble import EnsembleEvaluator
from clefprove.model.ensemble import Ensemble
from clefprove.model.importers import import_model
from tests.model.test_importers import decide

pd = pytest.importorskip("pandas")
xgb = pytest.importorskip("xgboost")

UA = ["curl", "Chrome", "Safari", "python-requests", "Firefox"]  # pandas keeps this order
PORTS = [22, 80, 443, 8080]


def _train(path: Path, rounds: int) -> object:
    rng = np.random.default_rng(5)
    n = 3000
    ua, port, rtt = rng.choice(UA, n), rng.choice(PORTS, n), rng.uniform(0, 1000, n)
    y = ((np.isin(ua, ["curl", "python-requests"]) & (rtt > 300)) | (port == 22)).astype(int)
    frame = pd.DataFrame(
        {
            "ua": pd.Categorical(ua, categories=UA),
            "port": pd.Categorical(port, categories=PORTS),
            "rtt": rtt,
        }
    )
    clf = xgb.XGBClassifier(
        n_estimators=rounds, max_depth=3, enable_categorical=True, tree_method="hist"
    ).fit(frame, y)
    clf.save_model(path)
    if (
        not json.loads(path.read_text())["learner"]["gradient_booster"]["model"]
        .get("cats", {})
        .get("enc")
    ):
        pytest.skip("this XGBoost records no categories (3.1+ does)")
    return clf


def _with_spec(tmp_path: Path, feats: list[dict[str, object]]) -> object:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"features": feats, "actions": ["no", "yes"]}))
    return import_model("xgboost", tmp_path / "m.json", spec)


def _frame(ua: list[str], port: list[int | str], rtt: np.ndarray) -> object:
    return pd.DataFrame({"ua": pd.Categorical(ua), "port": pd.Categorical(port), "rtt": rtt})


@pytest.mark.parametrize("rounds", [1, 8])
def test_values_are_the_recorded_categories_and_decide_as_predict(
    tmp_path: Path, rounds: int
) -> None:
    clf = _train(tmp_path / "m.json", rounds)
    model = import_model("xgboost", tmp_path / "m.json")
    assert isinstance(model, Ensemble) == (rounds > 1)
    ua, port = model.features[0], model.features[1]
    assert list(ua.values) == UA and ua.values[int(ua.default)] == "curl"
    assert list(port.values) == [str(p) for p in PORTS]
    # every pair of categories against the thresholds on rtt
    rtts = np.array([0.0, 299.0, 300.0, 300.5, 301.0, 600.0, 999.0, 1e6])
    names_ua, names_port = UA, PORTS
    rows = [(u, p, r) for u in names_ua for p in names_port for r in rtts]
    frame = _frame(
        [u for u, _, _ in rows], [p for _, p, _ in rows], np.array([r for *_, r in rows])
    )
    expect = clf.predict(frame)
    codes = np.array(
        [[names_ua.index(u), names_port.index(p), r] for u, p, r in rows], dtype=np.float64
    )
    got = (
        EnsembleEvaluator(model).evaluate(codes).actions if rounds > 1 else decide(model, codes)[0]
    )
    assert np.array_equal(np.asarray(got), expect)


def test_a_spec_in_another_order_is_refused(tmp_path: Path) -> None:
    _train(tmp_path / "m.json", 3)
    feats = [
        {"name": "ua", "type": "categorical", "values": sorted(UA), "default": "Chrome"},
        {"name": "port", "type": "categorical", "values": [str(p) for p in PORTS], "default": "22"},
        {"name": "rtt", "type": "float", "min": 0, "max": 1000, "default": 0},
    ]
    with pytest.raises(ImportModelError, match=r"feature 'ua'.*in their order: \['curl'"):
        _with_spec(tmp_path, feats)
    feats[0]["values"] = [*UA, "Opera"]  # predict would not decide "Opera" as its code 5
    with pytest.raises(ImportModelError, match=r"feature 'ua'"):
        _with_spec(tmp_path, feats)
    feats[0]["values"] = list(UA)
    model = _with_spec(tmp_path, feats)
    assert list(model.features[0].values) == UA
