"""Agreement of our similarity scorers with the published JetBrains CoNaLa metric values.

``conala-all-grades.json`` (JetBrains-Research/codegen-metrics) holds, per output, chrF, BLEU,
ROUGE-L and CodeBLEU rounded to 3 decimals. For each scorer this prints the share of the 2,360
outputs within 0.01 of the published value, and the mean absolute difference.

    python analysis/similarity_agreement.py [--data ../shared/data]

Measured 2026-12-06 (share within 0.01, mean |diff|): chrF 1.000, 0.0002; BLEU 0.990, 0.0014
(1.000 with ``refs=joint``); ROUGE-L 1.000, 0.0002 with its default TranX tokens (0.650, 0.0466
with ``tokenizer=code``); CodeBLEU 0.062, 0.1381 (0.058 with TranX tokens). CodeBLEU is the
``codebleu`` package's, which JetBrains' values are not: an output equal to its reference, which
they score 1.000, the package scores 0.642 on ``os.kill(os.getpid(), signal.SIGUSR1)``, whose
two whitespace tokens leave its n-gram matches 0.316 and 0.251 (a longer snippet equal to its
reference scores 1.0); one-line CoNaLa snippets are mostly that short.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from hybridmetric.scorers import build

SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")
CASES = (  # (label, scorer entry, settings, published column)
    ("chrf", "chrf", {}, "chrf"),
    ("bleu (refs=best, default)", "bleu", {}, "bleu"),
    ("bleu (refs=joint)", "bleu", {"refs": "joint"}, "bleu"),
    ("rouge_l (tranx tokens, default)", "rouge_l", {}, "rougel"),
    ("rouge_l (code tokens)", "rouge_l", {"tokenizer": "code"}, "rougel"),
    ("codebleu (whitespace tokens, default)", "codebleu", {}, "codebleu"),
    ("codebleu (tranx tokens)", "codebleu", {"tokenizer": "tranx"}, "codebleu"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    path = args.data / "conala-human-grades" / "conala" / "conala-all-grades.json"
    items = json.loads(path.read_text("utf-8"))
    frame = pd.DataFrame([
        {"task_id": str(i), "candidate": item[s], "references": item["snippet"],
         "language": "python", **{m: item[f"{m}-{s}"] for m in ("chrf", "bleu", "rougel",
                                                                  "codebleu")}}
        for i, item in enumerate(items) for s in SYSTEMS
    ])
    print(f"{'scorer':<40} {'within 0.01':>11} {'mean |diff|':>11}")
    for label, name, settings, column in CASES:
        (scorer,) = build([name], {name: settings})
        diff = np.abs(scorer.score(frame).iloc[:, 0].to_numpy() - frame[column].to_numpy())
        print(f"{label:<40} {np.mean(diff <= 0.01):>11.3f} {diff.mean():>11.4f}")


if __name__ == "__main__":
    main()
