"""Full-scale parity of our CodeBERTScore with ``code_bert_score.score`` (0.4.1).

Float32 on CPU, the embedded all-MiniLM-L6-v2 encoder at the default layer, both tools given the
same local model path and ``num_layers``. Sets:

- CoNaLa: the 2,360 graded outputs (472 intents x 5 systems) from
  ``conala-human-grades.json``, each paired with each of its references (2,500 pairs), with and
  without the intent as context; without context also as rows with all their references (the
  reference package takes the best over a list of references).
- HumanEval: 500 samples (seeded) of the Python Codex samples the paper scored
  (``humaneval_{hyps,refs,srcs}.txt``), with and without the NL description as context.

The reference package runs with the repairs of :mod:`hybridmetric.anchors`; both tools get each
context in the tokenizer's decoded form, which encodes to the same token ids.

Rows that differ by more than 1e-4 in a batched reference run are scored again by the reference
one pair at a time: its result for a text depends on its batch-mates (padding counts as a match of
similarity 0, and windows are cut on the batch's padded length), ours does not.

Measured 2026-12-06 (layer 5; ours rounded to 6 decimals, as it writes its scores): CoNaLa, all
three sets: max |diff| 8.0e-7 over every pair and part. HumanEval without context: 14 of 500 rows
differ in the batched run (up to 1.4e-2); scored alone by the reference, they agree to 5.2e-7.
HumanEval with context: 12 rows differ in the batched run (up to 5.7e-2); alone, all agree to
5.2e-7 except rows 471 and 472 (4.2e-3 and 8.0e-3), whose reference text is 484 tokens long and
whose candidate is over 512: even alone, the reference package encodes the pair in one padded
batch and so cuts the shorter text's windows on the longer one's length.

Run: ``.venv/bin/python analysis/codebertscore_parity.py [--humaneval 500] [--skip-conala]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hybridmetric import anchors
from hybridmetric.scorers.codebertscore import CodeBertScore, embedded_model_path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
CONALA = SHARED / "conala-human-grades" / "conala" / "conala-human-grades.json"
HUMANEVAL = SHARED / "codebertscore-humaneval" / "evaluation" / "data" / \
    "humaneval_python_davinci-0.8-keep"
SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")


def reference(cands: list[str], refs: list, layer: int, sources: list[str] | None) -> np.ndarray:
    """code_bert_score.score as an (n, 4) array of P, R, F1, F3 (see hybridmetric.anchors)."""
    return anchors.code_bert_score(cands, refs, embedded_model_path(), layer, sources)


def conala_pairs() -> tuple[pd.DataFrame, pd.DataFrame]:
    items = json.loads(CONALA.read_text())
    rows = [{"candidate": item[s], "references": list(item["snippet"]), "context": item["intent"]}
            for item in items for s in SYSTEMS]
    grouped = pd.DataFrame(rows)
    pairs = pd.DataFrame([{**row, "references": [ref]} for row in rows
                          for ref in row["references"]])
    return grouped, pairs


def humaneval_pairs(count: int, seed: int) -> pd.DataFrame:
    lines = {name: (HUMANEVAL / f"humaneval_{name}.txt").read_text().split("\n")
             for name in ("hyps", "refs", "srcs")}
    total = len(lines["hyps"]) - (lines["hyps"][-1] == "")
    pick = np.sort(np.random.default_rng(seed).choice(total, size=count, replace=False))
    return pd.DataFrame({"candidate": [lines["hyps"][i] for i in pick],
                         "references": [[lines["refs"][i]] for i in pick],
                         "context": [lines["srcs"][i] for i in pick]})


def compare(label: str, frame: pd.DataFrame, context: bool, layer: int) -> float:
    started = time.perf_counter()
    with CodeBertScore(use_context=context, layer=layer, dtype="float32", device="cpu") as ours:
        mine = ours.score(frame).to_numpy()
    middle = time.perf_counter()
    single = all(len(refs) == 1 for refs in frame["references"])
    refs = [r[0] for r in frame["references"]] if single else list(frame["references"])
    theirs = reference(frame["candidate"].tolist(), refs, layer,
                       frame["context"].tolist() if context else None)
    ended = time.perf_counter()
    diff = np.abs(mine - theirs)
    over = np.flatnonzero((diff > 1e-4).any(axis=1))
    print(f"{label:38s} n={len(frame):5d}  max|diff| P {diff[:, 0].max():.2e} R "
          f"{diff[:, 1].max():.2e} F1 {diff[:, 2].max():.2e} F3 {diff[:, 3].max():.2e}  "
          f"over 1e-4: {len(over)}  (ours {middle - started:.0f}s, "
          f"reference {ended - middle:.0f}s)", flush=True)
    if len(over) == 0:
        return float(diff.max())
    # The reference's numbers for a text depend on its batch (padding counts as a match of
    # similarity 0; windows are cut on the padded length). Scored alone, it has no batch-mates.
    alone = np.vstack([reference([frame["candidate"].iloc[i]], [refs[i]], layer,
                                 [frame["context"].iloc[i]] if context else None)
                       for i in over])
    rest = np.delete(diff, over, axis=0).max(initial=0.0)
    worst = max(float(np.abs(mine[over] - alone).max()), float(rest))
    print(f"{'':38s} those {len(over)} rows scored alone by the reference: max|diff| "
          f"{np.abs(mine[over] - alone).max():.2e}; all rows with them: {worst:.2e}", flush=True)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--humaneval", type=int, default=500, help="HumanEval samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-conala", action="store_true", help="only the HumanEval sets")
    args = parser.parse_args()
    if not CONALA.is_file() or not HUMANEVAL.is_dir():
        sys.exit(f"needs ../shared/data beside the repository ({SHARED})")
    layer = CodeBertScore().layer
    grouped, pairs = conala_pairs()
    humaneval = humaneval_pairs(args.humaneval, args.seed)
    for frame in (pairs, humaneval):
        frame["context"] = anchors.decoded_form(frame["context"].tolist(), embedded_model_path())
    worst = [] if args.skip_conala else [
        compare("CoNaLa pairs, no context", pairs, False, layer),
        compare("CoNaLa pairs, intent as context", pairs, True, layer),
        compare("CoNaLa rows, all references", grouped, False, layer),
    ]
    worst += [compare("HumanEval, no context", humaneval, False, layer),
              compare("HumanEval, description as context", humaneval, True, layer)]
    print(f"layer {layer}: max |diff| over all sets {max(worst):.2e} "
          f"({'within' if max(worst) <= 1e-4 else 'OVER'} 1e-4)")


if __name__ == "__main__":
    main()
