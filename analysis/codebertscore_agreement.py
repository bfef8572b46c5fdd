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

Recorded sweep (2026-11-30, float32 CPU, idf off, no_punc; mean over the 5 folds):

    metric            dev tau  r_p    r_s   | test tau  r_p    r_s    dev (tau+r_s)/2, ctx F1
    chrF (JetBrains)   0.479  0.636  0.628  |  0.473  0.641  0.624
    L0 ctx .f1         0.491  0.625  0.627  |  0.489  0.648  0.641   0.559
    L1 ctx .f1         0.495  0.628  0.631  |  0.490  0.653  0.645   0.563
    L2 ctx .f1         0.494  0.632  0.635  |  0.486  0.657  0.651   0.565
    L3 ctx .f1         0.493  0.634  0.639  |  0.494  0.663  0.659   0.566
    L4 ctx .f1         0.497  0.632  0.638  |  0.500  0.662  0.660   0.568
    L5 ctx .f1         0.502  0.630  0.637  |  0.508  0.661  0.660   0.570  <- chosen
    L6 ctx .f1         0.494  0.629  0.637  |  0.506  0.663  0.662   0.566
    L5 ctx .f3         0.509  0.608  0.614  |  0.516  0.628  0.625
    L5 no-ctx .f1      0.502  0.641  0.647  |  0.511  0.669  0.667
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
from scipy import stats

from hybridmetric.scorers.codebertscore import DEFAULT_LAYERS, CodeBertScore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "conala-human-grades"
SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")
PAPER = {"CodeBERTScore (paper)": (0.517, 0.674, 0.662), "chrF (paper)": (0.470, 0.635, 0.623)}
#: The authors' CONALA_CV_SUBSETS (neulab/code-bert-score, evaluation/constants.py).
FOLDS = np.array([
    [224, 421, 392, 380, 414, 437, 76, 20, 2, 174, 240, 355, 303, 230, 326, 328, 233, 116, 340,
     291, 425, 186, 24, 46, 74, 81, 283, 58, 360, 4, 246, 465, 356, 217, 431, 25, 214, 169, 238,
     412, 390, 204, 144, 409, 191, 69, 37, 279, 298, 407, 29, 118, 88, 222, 314, 90, 466, 251,
     415, 23, 22, 450, 158, 363, 145, 227, 387, 454, 128, 180, 15, 249, 268, 396, 339, 468, 234,
     6, 252, 402, 197, 42, 167, 153, 143, 63, 71, 470, 1, 105, 388, 209, 36, 416, 208, 205, 138,
     275, 460, 400],
    [310, 293, 371, 40, 351, 111, 117, 270, 177, 253, 420, 407, 53, 327, 462, 65, 402, 334, 262,
     453, 119, 58, 468, 410, 143, 190, 455, 221, 1, 386, 5, 367, 118, 286, 281, 174, 242, 209,
     102, 461, 247, 39, 94, 291, 20, 84, 460, 439, 136, 113, 294, 343, 122, 133, 194, 175, 256,
     359, 218, 35, 171, 305, 135, 274, 436, 85, 92, 30, 414, 2, 165, 240, 107, 466, 184, 295, 248,
     325, 257, 358, 199, 64, 347, 403, 71, 182, 428, 316, 418, 11, 114, 396, 148, 352, 196, 160,
     15, 112, 79, 388],
    [63, 233, 401, 408, 330, 34, 454, 55, 108, 160, 351, 282, 464, 176, 370, 347, 15, 72, 204, 58,
     430, 139, 349, 42, 6, 281, 92, 168, 298, 24, 66, 127, 422, 210, 207, 447, 357, 405, 318, 335,
     448, 128, 470, 208, 85, 388, 163, 36, 200, 166, 425, 167, 371, 54, 355, 239, 416, 201, 194,
     383, 364, 135, 348, 248, 468, 62, 258, 376, 363, 246, 222, 152, 377, 90, 287, 263, 186, 53,
     3, 265, 217, 5, 235, 254, 427, 164, 456, 155, 197, 395, 467, 378, 30, 226, 399, 440, 81,
     134, 404, 129],
    [76, 223, 354, 263, 216, 12, 141, 217, 215, 229, 97, 121, 108, 277, 292, 436, 471, 240, 391,
     400, 337, 470, 32, 455, 244, 91, 316, 59, 281, 266, 225, 325, 234, 24, 178, 81, 434, 9, 386,
     142, 27, 309, 460, 154, 371, 38, 387, 52, 122, 248, 22, 358, 90, 427, 433, 274, 11, 53, 161,
     247, 306, 440, 294, 190, 210, 381, 98, 446, 453, 242, 273, 160, 331, 383, 25, 363, 195, 3,
     334, 459, 10, 438, 28, 441, 435, 416, 405, 347, 37, 171, 34, 404, 196, 6, 445, 268, 328, 115,
     299, 428],
    [59, 250, 223, 346, 276, 174, 456, 329, 248, 9, 277, 87, 469, 240, 75, 366, 438, 190, 404,
     460, 26, 191, 176, 459, 48, 253, 140, 260, 116, 308, 219, 84, 279, 228, 2, 61, 352, 338, 120,
     181, 12, 117, 359, 373, 1, 369, 209, 47, 106, 415, 334, 86, 158, 315, 156, 448, 133, 398, 303,
     203, 342, 74, 189, 358, 392, 95, 247, 32, 171, 399, 319, 381, 333, 374, 97, 417, 54, 211, 332,
     271, 431, 125, 244, 51, 165, 437, 25, 385, 275, 286, 45, 98, 169, 406, 264, 297, 114, 10,
     314, 430],
])
TIE = 0.001


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


def darr_tau(human: np.ndarray, metric: np.ndarray) -> float:
    """da-RR tau (variant B) over ordered within-problem pairs; arrays are [problems, systems]."""
    concordant = discordant = ties = 0
    for h_row, m_row in zip(human, metric, strict=True):
        h_diff = h_row[:, None] - h_row[None, :]
        m_diff = m_row[:, None] - m_row[None, :]
        judged = np.abs(h_diff) >= TIE  # also excludes the diagonal
        m_tie = np.abs(m_diff) < TIE
        agree = np.sign(h_diff) == np.sign(m_diff)
        concordant += int(np.sum(judged & ~m_tie & agree))
        discordant += int(np.sum(judged & ~m_tie & ~agree))
        ties += int(np.sum(judged & m_tie))
    return (concordant - discordant) / (concordant + discordant + ties)


def agreement(human: np.ndarray, metric: np.ndarray) -> dict[str, tuple[float, float, float]]:
    """Mean (tau, Pearson, Spearman) over the 5 dev folds and the 5 test folds."""
    result = {}
    for split in ("dev", "test"):
        values = []
        for fold in FOLDS:
            pick = fold if split == "dev" else ~fold
            h, m = human[pick], metric[pick]
            values.append((darr_tau(h, m), stats.pearsonr(h.ravel(), m.ravel())[0],
                           stats.spearmanr(h.ravel(), m.ravel())[0]))
        result[split] = tuple(float(v) for v in np.mean(values, axis=0))
    return result


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
