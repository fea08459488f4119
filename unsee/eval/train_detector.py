"""Train the learned detector: ``python -m unsee.eval.train_detector``.

Builds the corpus (:mod:`.detector_corpus`: AgentDojo, the hard cases,
generated texts, installed packages' docs), cuts each text into units with
the detector's own features (:func:`unsee.plugins.detect.text_features`),
labels the units, fits an L2-regularised logistic regression (scipy's L-BFGS,
class-balanced, every source weighted alike) and writes the weights
(``plugins/detect/learned_detector.npz`` by default, the file unsee ships).

Unit labels: a unit of an injected text is positive when half its non-blank
characters lie in the injection, negative when none does, left out otherwise;
a hard case's injection is not located, so its units that the signals flag
(score 0.5 or more) are positive and the rest are left out; every unit of a
benign text is negative.

``--cv`` reports generalization across sources first: trained without the hard
cases and scored on them, then trained without AgentDojo and scored on it
(recall, false positives; the eval's own :func:`~.detector_eval.evaluate`).

Deterministic: the corpus is seeded (``--seed``), the optimiser has no
randomness, and the file has no timestamps: the same corpus (its SHA-256 is
recorded in the file; the package docs depend on what is installed) and seed
give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from unsee.plugins.detect import (LEARNED_SHAPE, LEARNED_WEIGHTS, LearnedDetector, LearnedWeights, SignalDetector,
                                  save_learned_weights, text_features)

from .detector_corpus import Doc, corpus

SOURCES = ("agentdojo", "hard-cases", "augmented", "written", "package-docs")
#: L2 penalty (per unit of total sample weight)
L2 = 1e-4
#: how much each source counts (its units' share of the total, before classes are balanced): the
#: hand-written texts three times as much as another source (leave-one-author-out validation,
#: docs/detector-learned.md: recall 0.68 against 0.60 at 0.1 false positives)
SOURCE_WEIGHTS: dict[str, float] = {"written": 3.0}


def _unit_labels(doc: Doc, spans: list[tuple[int, int]], found: Sequence[Any]) -> list[float | None]:
    if not doc.injection:
        return [0.0] * len(spans)
    if doc.spans is None:  # (weak labels: the signals' own findings)
        hot = [(f.start, f.end) for f in found if f.score >= 0.5]
        return [1.0 if any(a < e and s < b for s, e in hot) else None for a, b in spans]
    inside = bytearray(len(doc.text))
    for a, b in doc.spans:
        inside[a:b] = b"\x01" * (b - a)
    out: list[float | None] = []
    for a, b in spans:
        chars = [i for i in range(a, b) if not doc.text[i].isspace()]
        share = sum(inside[i] for i in chars) / len(chars) if chars else 0.0
        out.append(1.0 if share >= 0.5 else 0.0 if share == 0 else None)
    return out


def unit_table(docs: Sequence[Doc]) -> dict[str, Any]:
    """The labelled units of ``docs``: a sparse matrix of the hashed features, the dense
    features, labels, and each unit's source."""
    import numpy as np
    from scipy import sparse

    rows, cols, vals, dense, y, src, owner = [], [], [], [], [], [], []
    n = 0
    signals: dict[tuple, SignalDetector] = {}
    for k, doc in enumerate(docs):
        det = signals.get(doc.tools) or signals.setdefault(doc.tools, SignalDetector(doc.tools))
        feats, spans, found = text_features(doc.text, det)
        labels = _unit_labels(doc, spans, found)
        keep = [i for i, lab in enumerate(labels) if lab is not None]
        if not keep:
            continue
        index = np.full(len(spans), -1, dtype=np.int64)
        index[keep] = np.arange(n, n + len(keep))
        sel = index[feats.rows] >= 0
        rows.append(index[feats.rows][sel])
        cols.append(feats.cols[sel])
        vals.append(feats.vals[sel])
        dense.append(feats.dense[keep])
        y.extend(labels[i] for i in keep)
        src.extend([doc.source] * len(keep))
        owner.extend([k] * len(keep))
        n += len(keep)
    x = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n, LEARNED_SHAPE[0]), dtype=np.float64)
    return {"x": x, "dense": np.concatenate(dense).astype(np.float64), "y": np.asarray(y), "source": np.asarray(src),
            "doc": np.asarray(owner)}


def rows_of(table: dict[str, Any], keep: Any) -> dict[str, Any]:
    """The units of ``table`` whose row ``keep`` (a boolean array) marks."""
    return {k: v[keep] for k, v in table.items()}


def fit(table: dict[str, Any], *, l2: float = L2, max_iter: int = 400,
        source_weights: Mapping[str, float] | None = None) -> LearnedWeights:
    """A logistic regression on ``table`` (:func:`unit_table`): class-balanced, and each
    (source, class) weighted alike, so that no corpus outweighs another — times
    ``source_weights[source]`` where given (default :data:`SOURCE_WEIGHTS`)."""
    weigh = SOURCE_WEIGHTS if source_weights is None else source_weights
    import numpy as np
    from scipy import sparse
    from scipy.optimize import minimize

    x = sparse.hstack([table["x"], sparse.csr_matrix(table["dense"])], format="csr")
    y, src = table["y"], table["source"]
    w = np.zeros(len(y))
    groups = sorted({(s, c) for s, c in zip(src.tolist(), y.tolist())})
    for s, c in groups:
        mask = (src == s) & (y == c)
        w[mask] = weigh.get(s, 1.0) / mask.sum()
    for c in (0.0, 1.0):  # (each class half of the total)
        mask = y == c
        if mask.any():
            w[mask] *= 0.5 / w[mask].sum()
    d = x.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ theta[:d] + theta[d]
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        ll = -(w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum()
        g = w * (p - y)
        grad = np.concatenate([x.T @ g + l2 * theta[:d], [g.sum()]])
        return ll + 0.5 * l2 * float(theta[:d] @ theta[:d]), grad

    res = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    theta = res.x
    hashed = theta[:table["x"].shape[1]]
    return LearnedWeights(hashed.astype(np.float32), theta[table["x"].shape[1]:d].astype(np.float32),
                          float(theta[d]), {"units": int(len(y)), "positives": int(y.sum()),
                                            "iterations": int(res.nit), "l2": l2})


def train(sources: Sequence[str], *, seed: int = 35, per_task: int = 3, n_augmented: int = 1500,
          n_docs: int = 1500, log: Any = None) -> LearnedWeights:
    """Weights trained on ``sources`` (names of :mod:`.detector_corpus`)."""
    docs = corpus(sources, seed=seed, per_task=per_task, n_augmented=n_augmented, n_docs=n_docs)
    return train_docs(docs, seed=seed, sources=sources, log=log)


def train_docs(docs: Sequence[Doc], *, seed: int, sources: Sequence[str], log: Any = None,
               table: dict[str, Any] | None = None) -> LearnedWeights:
    """Weights trained on ``docs`` (the meta records ``seed``, ``sources`` and the corpus's digest);
    ``table``: their :func:`unit_table`, when already made."""
    t0 = time.perf_counter()
    weights = fit(unit_table(docs) if table is None else table)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    digest = hashlib.sha256()
    for d in docs:
        counts[d.source][d.injection] += 1
        digest.update(f"{d.injection}:{d.spans}:{d.text}\0".encode())
    # (the corpus's digest: the package docs depend on what is installed; the same digest and seed
    # give the same weights)
    meta = dict(weights.meta, seed=seed, sources=",".join(sources), corpus_sha256=digest.hexdigest(),
                docs=json.dumps({k: {"benign": v[0], "injected": v[1]} for k, v in sorted(counts.items())}))
    if log:
        log(f"trained on {len(docs)} texts, {meta['units']} units ({meta['positives']} positive) in "
            f"{time.perf_counter() - t0:.0f} s: {meta['docs']}")
    return LearnedWeights(weights.hashed, weights.dense, weights.bias, meta)


def _doc_samples(docs: Sequence[Doc]) -> list[Any]:
    """``docs`` as the eval's samples (a text is caught when anything in it is flagged, as on the
    held-out sets)."""
    from .detector_eval import Sample

    return [Sample(d.text, d.injection, "written", d.kind, d.kind, tools=d.tools) for d in docs]


def cross_validate(*, seed: int = 35, per_task: int = 3, log: Any = print) -> dict[str, Any]:
    """Generalization across sources: trained without one and scored on it — the hard cases,
    AgentDojo, and each author's file of the written texts in turn (their other files stay in);
    the signals detector's figures beside."""
    from .detector_corpus import WRITTEN, _agentdojo_samples, load_written
    from .detector_eval import agentdojo_tools, evaluate, hard_case_samples

    names = [name for name in SOURCES if name != "written"]
    docs = corpus(names, seed=seed, per_task=per_task) + [d for f in WRITTEN for d in load_written(f)]
    table = unit_table(docs)  # (once: a fold leaves out the units of its texts)
    import numpy as np

    def author(d: Doc) -> str:
        return d.kind.split("/", 1)[0] if d.source == "written" else ""

    folds: dict[str, tuple[Any, list[Any]]] = {
        "hard-cases": (lambda d: d.source == "hard-cases", hard_case_samples(agentdojo_tools())),
        "agentdojo": (lambda d: d.source == "agentdojo", _agentdojo_samples(None))}
    for f in WRITTEN:
        folds[f.stem] = ((lambda d, stem=f.stem: author(d) == stem), None)
    out = {}
    for held, (left_out, samples) in folds.items():
        out_docs = np.fromiter((left_out(d) for d in docs), dtype=bool, count=len(docs))
        if samples is None:
            samples = _doc_samples([d for d, o in zip(docs, out_docs) if o])
        train_set = [d for d, o in zip(docs, out_docs) if not o]
        weights = train_docs(train_set, seed=seed, sources=[f"all but {held}"], log=log,
                             table=rows_of(table, ~out_docs[table["doc"]]))
        for det in (LearnedDetector(weights), SignalDetector()):
            r = evaluate(det, samples)
            key = f"{held}/{det.name}"
            out[key] = {k: r[k] for k in ("recall", "false_positive_rate", "hard_recall", "hard_false_positive_rate",
                                          "ms_per_1000", "outputs")}
            if log:
                log(f"held out {held}, {det.name}: {json.dumps(out[key])}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m unsee.eval.train_detector", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=LEARNED_WEIGHTS, help="where to write the weights (.npz)")
    ap.add_argument("--sources", default=",".join(SOURCES), help="comma-separated: " + ", ".join(SOURCES))
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--per-task", type=int, default=3, help="AgentDojo carriers per (suite, attack, injection task)")
    ap.add_argument("--augmented", type=int, default=1500, help="generated injected texts (as many benign)")
    ap.add_argument("--docs", type=int, default=1500, help="benign texts from installed packages' docs")
    ap.add_argument("--cv", action="store_true", help="first report cross-source generalization")
    args = ap.parse_args(argv)
    if args.cv:
        cross_validate(seed=args.seed, per_task=args.per_task)
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    weights = train(sources, seed=args.seed, per_task=args.per_task, n_augmented=args.augmented, n_docs=args.docs,
                    log=print)
    save_learned_weights(args.out, weights)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    # AgentDojo lists some sets of strings (an event's participants) in hash order: a fixed hash
    # seed makes its outputs, and so the corpus, the same from run to run
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "unsee.eval.train_detector", *sys.argv[1:]])
    sys.exit(main())
