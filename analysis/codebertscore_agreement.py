"""CodeBERTScore agreement with CoNaLa human usefulness ratings, with the paper's protocol.

Protocol of CodeBERTScore (Zhou et al. 2023, arXiv 2302.05527), Table 1, as in the authors'
``evaluation/calc_correlation.py`` (see ../shared/data/codebertscore-humaneval/SOURCES.md):

- human score of an output = mean of its raters' raw grades (0-4), from
  ``conala-human-grades.json``; the five systems of each of the 472 intents are compared;
- tau = da-RR Kendall tau, variant B of Stanchev et al.: over ordered pairs of outputs of the same
  intent, pairs the humans tie are skipped, metric ties (difference < 0.001) count as ties:
  (C - D) / (C + D + T);
- Pearson and Spearman over all outputs of the evaluated intents pooled;
- five folds of 100 intents (the authors' ``CONALA_CV_SUBSETS``): "dev" = the fold, "test" =
  ``~fold`` (bitwise NOT: the fold mirrored from the end). Numbers are means over the 5 folds.

The protocol code is checked by reproducing chrF from the JetBrains scores in
``conala-all-grades.json`` (published recomputation: .473/.641/.624).

Layer choice for the embedded encoder (``--layers 0,1,2,3,4,5,6``): the layer with the best mean
of dev tau and dev Spearman of F1 with the intent as context (the paper's selection rule,
``best_config``), recorded in ``hybridmetric.scorers.codebertscore.DEFAULT_LAYERS``.

Run: ``.venv/bin/python analysis/codebertscore_agreement.py [--layers 0,1,2,3,4,5,6]``

Recorded sweep (2026-12-06, float32 CPU, idf off, no_punc; mean over the 5 folds; a selection
of the rows the script prints, four a layer, and a last column worked out here from dev tau and
dev r_s, the selection rule's score, which it does not print):

    metric            dev tau  r_p    r_s   | test tau  r_p    r_s    dev (tau+r_s)/2, ctx F1
    chrF (JetBrains)   0.479  0.636  0.628  |  0.473  0.641  0.624
    L0 ctx .f1         0.491  0.625  0.627  |  0.489  0.648  0.641   0.559
    L1 ctx .f1         0.495  0.628  0.631  |  0.490  0.653  0.645   0.563
    L2 ctx .f1         0.494  0.632  0.635  |  0.486  0.657  0.651   0.565
    L3 ctx .f1         0.493  0.634  0.639  |  0.494  0.663  0.659   0.566
    L4 ctx .f1         0.497  0.632  0.638  |  0.500  0.662  0.660   0.568
    L5 ctx .f1         0.502  0.630  0.637  |  0.508  0.661  0.660   0.570  <- chosen
    L6 ctx .f1         0.494  0.629  0.637  |  0.506  0.663  0.662   0.566
    L5 ctx .f3         0.509  0.608  0.614  |  0.516  0.628  0.626
    L5 no-ctx .f1      0.502  0.640  0.647  |  0.511  0.669  0.667
    L6 no-ctx .f1      0.518  0.664  0.677  |  0.531  0.689  0.693
    L6 no-ctx .f3      0.526  0.648  0.659  |  0.537  0.663  0.665

With this general-text encoder the intent as context does not help: without context every layer
agrees at least as well, and layer 6 without context is best overall (above the paper's
CodeBERTScore .517/.674/.662 with CodeBERT). The default keeps the paper's method (context on)
and its best layer; ``--set codebertscore.use_context=false --set codebertscore.layer=6`` is the
better configuration for this encoder on CoNaLa.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hybridmetric.protocols import codebertscore_protocol
from hybridmetric.scorers.codebertscore import DEFAULT_LAYERS, CodeBertScore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "conala-human-grades"
SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")
PAPER = {"CodeBERTScore (paper)": (0.517, 0.674, 0.662), "chrF (paper)": (0.470, 0.635, 0.623)}
def load_items() -> list[dict]:
    path = DATA / "conala" / "conala-human-grades.json"
    if not path.is_file():
        sys.exit(f"{path} is missing: this script needs ../shared/data beside the repository")
    return json.loads(path.read_text())


def generations(items: list[dict]) -> pd.DataFrame:
    """One row per (intent, system): candidate, references, context, mean human grade."""
    rows = [{"problem": p, "system": system, "candidate": item[system],
             "references": list(item["snippet"]), "context": item["intent"],
             "human": float(np.mean(list(item[f"grade-{system}"].values())))}
            for p, item in enumerate(items) for system in SYSTEMS]
    return pd.DataFrame(rows)


def agreement(human: np.ndarray, metric: np.ndarray) -> dict[str, tuple[float, float, float]]:
    """Mean (tau, Pearson, Spearman) over the 5 dev folds and the 5 test folds; arrays are
    [problems, systems] (hybridmetric.protocols.codebertscore_protocol)."""
    problem = np.repeat(np.arange(human.shape[0]), human.shape[1])
    return {split: codebertscore_protocol(human.ravel(), metric.ravel(), problem, split)
            for split in ("dev", "test")}


def grid(frame: pd.DataFrame, column: str | pd.Series) -> np.ndarray:
    values = frame[column] if isinstance(column, str) else column
    return np.asarray(values, dtype=float).reshape(-1, len(SYSTEMS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default=str(DEFAULT_LAYERS["embedded"]),
                        help="comma-separated layers of the embedded encoder to evaluate")
    args = parser.parse_args()
    items = load_items()
    frame = generations(items)
    human = grid(frame, "human")
    all_grades = json.loads((DATA / "conala" / "conala-all-grades.json").read_text())
    if [a["intent"] for a in all_grades] != [i["intent"] for i in items]:
        sys.exit("conala-all-grades.json and conala-human-grades.json list intents differently")
    chrf = np.array([[a[f"chrf-{s}"] for s in SYSTEMS] for a in all_grades])
    rows = [("chrF (JetBrains scores)", agreement(human, chrf))]
    for layer in (int(x) for x in args.layers.split(",")):
        for context in (True, False):
            with CodeBertScore(layer=layer, use_context=context, dtype="float32",
                               device="cpu") as scorer:
                scores = scorer.score(frame)
            for part in ("f1", "f3"):
                label = f"L{layer} {'ctx' if context else 'no-ctx'} .{part}"
                rows.append((label, agreement(human, grid(scores, f"score.codebertscore.{part}"))))
            print(f"layer {layer} context={context} done", file=sys.stderr, flush=True)
    print(f"{'metric':28s} {'dev tau':>8s} {'r_p':>6s} {'r_s':>6s} | {'test tau':>8s} "
          f"{'r_p':>6s} {'r_s':>6s}")
    for label, result in rows:
        dev, test = result["dev"], result["test"]
        print(f"{label:28s} {dev[0]:8.3f} {dev[1]:6.3f} {dev[2]:6.3f} | {test[0]:8.3f} "
              f"{test[1]:6.3f} {test[2]:6.3f}")
    for label, (tau, r_p, r_s) in PAPER.items():
        print(f"{label:28s} {'':8s} {'':6s} {'':6s} | {tau:8.3f} {r_p:6.3f} {r_s:6.3f}")


if __name__ == "__main__":
    main()
