"""The gate worker's side of an admission (``admit_file``), in process: what it stores, what it
hands back, and that the served model it prepares decides like the model loaded afresh."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from clefprove.app.admission import Admission, GateSettings, admit_file, diff_and_record
from clefprove.app.metrics import Metrics
from clefprove.app.served import serve_model
from clefprove.app.store import ModelStore
from clefprove.eval.evaluator import Evaluator
from clefprove.eval.inputs import RecordEncoder
from clefprove.model.clef import load, write_clef
from clefprove.model.source import compile_source
from tests.app.conftest import INVARIANTS, ROOT, SAFE, UNSAFE, all_block_source

SETTINGS = GateSettings((str(INVARIANTS),), None, None, 50_000_000, 1, 3)


def _admit(store: ModelStore, data: bytes, label: str = "upload") -> tuple[Admission, Path]:
    staged, digest = store.stage_and_hash(data)
    assert digest == hashlib.sha256(data).hexdigest() and staged.read_bytes() == data
    adm = admit_file(str(staged), SETTINGS, str(store.directory), "upload", label)
    # what the serving process receives: a copy through the pipe
    return pickle.loads(pickle.dumps(adm)), staged


def test_an_admitted_model_is_stored_and_prepared(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    data = SAFE.read_bytes()
    adm, staged = _admit(store, data)
    fresh = load(SAFE)
    assert adm.verdict.admitted and adm.verdict.sha256 == fresh.sha256
    assert not staged.exists()
    assert store.model_path(fresh.sha256).read_bytes() == data
    record = json.loads(store.report_path(fresh.sha256).read_text())
    assert record["origin"] == "upload" and record["admitted_at"] == adm.when
    assert record["summary"] == adm.body["summary"] and record["model"]["path"] == "upload"
    assert json.loads(adm.response) == adm.body
    # the model the worker hands over is the file's, node for node
    assert adm.model.sha256 == fresh.sha256
    assert adm.model.nodes.tobytes() == fresh.nodes.tobytes()
    # and its prebuilt evaluator decides like one built here, on every leaf's region
    served = serve_model(adm.model, adm.verdict, "upload", adm.when, Metrics(), adm.evaluator)
    assert served.evaluator is adm.evaluator
    assert served.leaf_actions == fresh.nodes["aux"].astype(np.intp).tolist()
    mine = Evaluator(fresh)
    enc = RecordEncoder(fresh)
    rng = np.random.default_rng(7)
    rows = []
    for f in fresh.features:
        if f.values:
            rows.append(rng.integers(0, len(f.values), 2000).astype(np.float64))
        else:
            rows.append(rng.uniform(f.min - 10, f.max + 10, 2000))
    x = np.stack(rows, axis=1)
    assert np.array_equal(served.evaluator.evaluate(x).leaves, mine.evaluate(x).leaves)
    one = [served.decide([list(r)])[0] for r in x[:200]]
    assert one == [mine.evaluate_one(r).leaf for r in x[:200]]
    assert served.decide([enc.values({})]) == [mine.evaluate_one(enc.values({})).leaf]


def test_a_refused_model_leaves_nothing_in_the_store(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    adm, staged = _admit(store, UNSAFE.read_bytes())
    assert adm.verdict.exit_code == 1 and adm.model is None and adm.evaluator is None
    assert adm.body["summary"]["violated"] == 1 and json.loads(adm.response) == adm.body
    assert not staged.exists()
    assert not list(store.directory.glob("*.clef")) and not list(store.directory.glob("*.json"))


@pytest.mark.parametrize("mangle", ["flip", "truncate", "empty", "json"])
def test_an_invalid_file_is_named_by_its_label_not_its_staging_name(
    tmp_path: Path, mangle: str
) -> None:
    store = ModelStore(tmp_path / "store")
    good = SAFE.read_bytes()
    data = {
        "flip": good[:100] + bytes([good[100] ^ 0x40]) + good[101:],
        "truncate": good[:-1],
        "empty": b"",
        "json": (ROOT / "examples" / "edge-allow-block.json").read_bytes(),
    }[mangle]
    adm, staged = _admit(store, data, label="upload")
    assert adm.verdict.exit_code == 2
    assert adm.body["error"].startswith("upload: ") and "incoming" not in adm.body["error"]
    assert "\n" not in adm.body["error"] and not staged.exists()


def test_an_ensemble_is_admitted_and_served_like_eval(tmp_path: Path) -> None:
    from clefprove.eval.ensemble import EnsembleEvaluator

    src = json.loads((ROOT / "tests" / "fixtures" / "ensemble_toy.json").read_text())
    data = write_clef(compile_source(src))
    store = ModelStore(tmp_path / "store")
    (tmp_path / "x.inv").write_text("invariant trivially:\n  ensure true\n")
    settings = GateSettings((str(tmp_path / "x.inv"),), None, None, 50_000_000, 1, 3)
    staged, digest = store.stage_and_hash(data)
    adm = pickle.loads(
        pickle.dumps(admit_file(str(staged), settings, str(store.directory), "upload", "upload"))
    )
    assert adm.verdict.admitted, adm.body
    assert store.model_path(digest).read_bytes() == data
    served = serve_model(adm.model, adm.verdict, "upload", adm.when, Metrics(), adm.evaluator)
    fresh = EnsembleEvaluator(load_bytes_model(data))
    enc = RecordEncoder(adm.model)
    rng = np.random.default_rng(3)
    rows = [
        enc.values(
            {
                "client_rtt_ms": float(rng.uniform(0, 1000)),
                "path_depth": int(rng.integers(0, 9)),
                "ua_family": str(rng.choice(["Chrome", "Firefox", "curl", "other"])),
                "is_tor": bool(rng.integers(0, 2)),
            }
        )
        for _ in range(300)
    ]
    want = fresh.evaluate(np.array(rows))
    for batch in (rows[:1], rows[:5], rows):  # one at a time and the vectorised path
        keys = served.decide(batch)
        for i, k in enumerate(keys):
            got = json.loads(served.answer(k))
            assert got["action"] == adm.model.actions[int(want.actions[i])]
            assert got["confidence"] == float(want.confidences[i])
            assert got["leaf"] == got["leaves"] == want.leaves[i].tolist()  # SPEC's key
            assert got["model"]["sha256"] == digest
    assert served.description()["trees"] == adm.model.n_trees


def load_bytes_model(data: bytes):  # type: ignore[no-untyped-def]
    from clefprove.model.clef import load_bytes

    return load_bytes(data)


def test_the_diff_worker_adds_the_diff_to_the_record(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    first, _ = _admit(store, SAFE.read_bytes())
    other = write_clef(compile_source(all_block_source()))
    second, _ = _admit(store, other)
    old, new = first.verdict.sha256, second.verdict.sha256
    entry = diff_and_record(old, new, str(store.directory))
    assert entry["from"] == old and entry["semantic"]["share_changed"] > 0
    record = json.loads(store.report_path(new).read_text())
    assert record["diff"] == entry and record["admitted_at"] == second.when
    # a worker's store never sweeps incoming/ (it would delete the file it is handed)
    staged, _ = store.stage_and_hash(b"pending")
    ModelStore(store.directory, sweep=False)
    assert staged.exists()
    ModelStore(store.directory)
    assert not staged.exists()
