"""Generate the bundled example: synthetic edge requests -> DecisionTreeClassifier -> .clef.

Deterministic (fixed seed).  The data follows plausible distributions over the SPEC §2 features,
the labels follow a security policy with noise, and the tree is converted with
``clefprove.from_sklearn``.  Run from the repository root:

    python examples/make_edge_example.py                    # the committed depth-12 example
    python examples/make_edge_example.py --block-floor 0 --version 1.0.0 \
        --out examples/edge-allow-block-1.0.0               # its predecessor, without the
                                                            # release policy (one violation)
    python examples/make_edge_example.py --depth 20 --out /tmp/edge-d20   # bench models
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

FEATURES = [
    {"name": "client_rtt_ms", "type": "float", "min": 0, "max": 10000, "default": 50},
    {"name": "tls_version", "type": "int", "min": 768, "max": 772, "default": 772},
    {"name": "path_depth", "type": "int", "min": 0, "max": 64, "default": 1},
    {"name": "referer_entropy", "type": "float", "min": 0, "max": 8, "default": 0},
    {
        "name": "ua_family",
        "type": "categorical",
        "values": ["Chrome", "Firefox", "Safari", "curl", "python-requests", "other"],
        "default": "other",
    },
    {"name": "is_tor", "type": "bool", "default": False},
]
ACTIONS = ["allow", "challenge", "rate_limit", "block"]
ALLOW, CHALLENGE, RATE_LIMIT, BLOCK = range(4)
UA = {v: i for i, v in enumerate(FEATURES[4]["values"])}


def generate(n: int, seed: int = 20261129) -> tuple[np.ndarray, np.ndarray]:
    """*n* synthetic requests (encoded feature matrix) and their policy labels (action index)."""
    rng = np.random.default_rng(seed)
    ua = rng.choice(6, size=n, p=[0.50, 0.14, 0.17, 0.07, 0.05, 0.07])
    tor = rng.random(n) < 0.04
    script = (ua == UA["curl"]) | (ua == UA["python-requests"])
    # Round-trip times: log-normal around 60 ms, slower over Tor and for a long tail of clients.
    rtt = rng.lognormal(np.log(60.0), 0.9, n)
    rtt = np.where(tor, rtt * rng.uniform(3, 8, n), rtt)
    rtt = np.where(rng.random(n) < 0.03, rng.uniform(300, 10000, n), rtt)
    rtt = np.clip(np.round(rtt, 3), 0, 10000)
    tls = rng.choice([772, 771, 770, 769, 768], size=n, p=[0.62, 0.30, 0.05, 0.02, 0.01])
    tls = np.where(script & (rng.random(n) < 0.5), 771, tls)
    depth = rng.poisson(1.6, n)
    scanners = rng.random(n) < np.where(script | tor, 0.25, 0.02)
    depth = np.where(scanners, rng.integers(3, 65, n), depth)
    depth = np.clip(depth, 0, 64)
    has_ref = rng.random(n) < np.where(script, 0.15, 0.7)
    entropy = np.where(has_ref, np.clip(rng.normal(4.2, 1.0, n), 0, 8), 0.0)
    entropy = np.where(script & has_ref, rng.uniform(5, 8, n), entropy)
    entropy = np.round(entropy, 4)
    X = np.column_stack([rtt, tls, depth, entropy, ua, tor]).astype(np.float64)

    # The policy (its boundaries sit a little inside the invariants' own, as a careful
    # policy author would put them).
    y = np.full(n, ALLOW)
    unknown_ua = ua == UA["other"]
    y[(rtt > 280) & (tls < 772)] = CHALLENGE
    y[(rtt >= 1000) | (depth >= 4)] = CHALLENGE
    y[unknown_ua & (depth >= 3)] = CHALLENGE
    y[script & (depth >= 3)] = RATE_LIMIT
    y[script & (entropy > 6.5)] = BLOCK
    y[tor & (depth >= 4)] = BLOCK
    y[(rtt > 5000) & (tls < 772)] = BLOCK
    # Noise: a few labels flipped at random (annotation errors, stale feeds).
    noise = rng.random(n) < 0.04
    y[noise] = rng.integers(0, 4, int(noise.sum()))
    return X, y


def train(depth: int, n: int = 400_000, seed: int = 20261129):
    from sklearn.tree import DecisionTreeClassifier

    X, y = generate(n, seed)
    clf = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=20, random_state=seed)
    clf.fit(X, y)
    return clf


def build(depth: int, n: int = 400_000, seed: int = 20261129):
    """Train the tree and convert it: (fitted classifier, clefprove Model)."""
    from clefprove.model.sklearn import from_sklearn

    clf = train(depth, n, seed)
    model = from_sklearn(
        clf,
        features=FEATURES,
        actions=ACTIONS,
        name="edge-allow-block",
        version="1.0.0",
        description=f"scikit-learn DecisionTreeClassifier(max_depth={depth}) on synthetic "
        f"edge requests (examples/make_edge_example.py, seed {seed})",
    )
    return clf, model


def model_source(model) -> dict:
    """The JSON source form of a compiled model (nested tree)."""
    from clefprove.model.features import feature_to_json
    from clefprove.model.types import NodeKind

    def node(i: int) -> dict:
        nd = model.node(i)
        if nd.kind is NodeKind.LEAF:
            return {"action": model.actions[nd.action], "confidence": nd.confidence}
        f = model.features[nd.feature]
        if nd.kind is NodeKind.CATEGORICAL:
            split = {"feature": f.name, "in": [f.values[c] for c in sorted(nd.categories)]}
        else:
            split = {"feature": f.name, "threshold": nd.threshold}
        return {**split, "left": node(nd.left), "right": node(nd.right)}

    out = {
        "name": model.name,
        "version": model.version,
        "features": [feature_to_json(f) for f in model.features],
        "actions": list(model.actions),
    }
    if "description" in model.metadata:
        out["description"] = model.metadata["description"]
    out["tree"] = node(0)
    return out


def apply_block_floor(source: dict, floor: float) -> int:
    """The release policy: a leaf that would block with confidence below *floor* rate-limits
    instead (an unconfident block hurts real users; rate limiting is the cautious fallback).
    Rewrites *source* in place and returns the number of leaves changed."""
    changed = 0
    stack = [source["tree"]]
    while stack:
        node = stack.pop()
        if "action" in node:
            if node["action"] == "block" and node["confidence"] < floor:
                node["action"] = "rate_limit"
                changed += 1
        else:
            stack += [node["left"], node["right"]]
    return changed


def main() -> None:
    from clefprove.model.clef import write_clef
    from clefprove.model.source import compile_source

    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=12, help="max_depth of the tree (default 12)")
    ap.add_argument("--rows", type=int, default=400_000, help="training rows (default 400000)")
    ap.add_argument(
        "--out",
        default=str(here / "edge-allow-block"),
        help="output path without suffix: writes OUT.json and OUT.clef",
    )
    ap.add_argument(
        "--block-floor",
        type=float,
        default=0.8,
        help="release policy: blocks below this confidence become rate_limit (0: off)",
    )
    ap.add_argument("--version", default="1.1.0", help="model version to record")
    args = ap.parse_args()
    _, model = build(args.depth, args.rows)
    source = model_source(model)
    source["version"] = args.version
    changed = apply_block_floor(source, args.block_floor)
    if changed:
        source["description"] += (
            f"; release policy: {changed} block leaves below confidence {args.block_floor} "
            "rate-limit instead"
        )
    text = json.dumps(source, indent=1) + "\n"
    model = compile_source(json.loads(text))  # exactly what the written JSON compiles to
    data = write_clef(model)
    out = args.out
    Path(out + ".json").write_text(text)
    Path(out + ".clef").write_bytes(data)
    print(
        f"{out}.json / .clef: {model.n_nodes} nodes, {model.n_leaves} leaves, "
        f"depth {model.max_depth}, {len(data)} bytes"
    )


if __name__ == "__main__":
    main()
