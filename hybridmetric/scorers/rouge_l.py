"""ROUGE-L (Lin 2004): F-measure of the longest common token subsequence.

Tokens come from :mod:`hybridmetric.scorers.tokenize`: ``tranx`` (the default, the CoNaLa
evaluation tokenizer that JetBrains used, which reproduces their published values) or ``code``.
The LCS length comes from rapidfuzz. Empty against empty scores 1; empty against non-empty 0.
"""

from __future__ import annotations

import pandas as pd
from rapidfuzz.distance import LCSseq

from hybridmetric.scorers.base import (
    Scorer,
    Setting,
    best_over_references,
    settled,
    single_column,
)
from hybridmetric.scorers.tokenize import TOKENIZERS


class RougeL(Scorer):
    name = "rouge_l"
    version = "2"  # 2: settled (rounded to 12 decimals)
    needs = ("references",)
    description = "ROUGE-L F-measure over code tokens (best reference)"
    settings_spec = {
        "tokenizer": Setting("tranx", "code tokenizer", choices=tuple(TOKENIZERS)),
        "beta": Setting(1.0, "recall weight of the F-measure", at_least=0),
    }
    packages = ("rapidfuzz",)

    def pair(self, candidate: str, reference: str) -> float:
        split = TOKENIZERS[self.settings["tokenizer"]]
        cand, ref = split(candidate), split(reference)
        if not cand or not ref:
            return float(not cand and not ref)
        lcs = LCSseq.similarity(cand, ref)
        if lcs == 0:
            return 0.0
        precision, recall = lcs / len(cand), lcs / len(ref)
        beta2 = self.settings["beta"] ** 2
        return (1 + beta2) * precision * recall / (recall + beta2 * precision)

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        return single_column(self, frame, settled(best_over_references(frame, self.pair)))
