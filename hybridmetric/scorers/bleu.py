"""BLEU (Papineni et al. 2002) at sentence level, by sacrebleu, on a 0-1 scale.

With several references the best single-reference BLEU is kept, like every similarity scorer here;
``refs=joint`` uses sacrebleu's multi-reference BLEU instead (n-gram counts pooled over references),
which, with the default ``tranx`` tokenization and exponential smoothing, reproduces the JetBrains
CoNaLa BLEU values. ``effective_order`` is on, as sentence-level BLEU needs; smoothing and
tokenization are settings and appear in the signature. An empty candidate or reference scores 0
(sacrebleu's convention).
"""

from __future__ import annotations

import pandas as pd
from sacrebleu.metrics import BLEU

from hybridmetric.scorers.base import (
    Scorer,
    Setting,
    best_over_references,
    references_of,
    settled,
    single_column,
)
from hybridmetric.scorers.tokenize import tranx_tokens


class Bleu(Scorer):
    name = "bleu"
    needs = ("references",)
    version = "3"  # 2: at most 1; 3: settled (rounded to 12 decimals)
    description = "sentence BLEU (sacrebleu, effective order) / 100"
    settings_spec = {
        "tokenize": Setting(
            "tranx", "tranx (code tokens, see scorers.tokenize) or a sacrebleu tokenizer",
            choices=("tranx", "13a", "intl", "char", "none"),
        ),
        "refs": Setting("best", "best: best single reference; joint: sacrebleu multi-reference",
                        choices=("best", "joint")),
        "smooth": Setting("exp", "smoothing method",
                          choices=("none", "floor", "add-k", "exp")),
        "smooth_value": Setting(None, "value for floor / add-k smoothing", kind=float),
        "lowercase": Setting(False, "lowercase before scoring"),
    }
    packages = ("sacrebleu",)

    def __init__(self, **settings: object):
        super().__init__(**settings)
        s = self.settings
        if s["smooth_value"] is not None:  # (else sacrebleu's own: floor 0.1, add-k 1)
            if s["smooth"] not in ("floor", "add-k"):
                raise ValueError(f"setting 'bleu.smooth_value' applies to smooth=floor or "
                                 f"add-k, not {s['smooth']}; leave it out")
            if not s["smooth_value"] > 0:
                raise ValueError("setting 'bleu.smooth_value' must be above 0 (a count that "
                                 f"stands in for none matched), got {s['smooth_value']!r}")
        tokenize = "none" if s["tokenize"] == "tranx" else s["tokenize"]
        self._metric = BLEU(tokenize=tokenize, smooth_method=s["smooth"],
                            smooth_value=s["smooth_value"], lowercase=s["lowercase"],
                            effective_order=True)

    def signature_fields(self) -> dict[str, object]:
        return {"effective_order": True}

    def _text(self, code: str) -> str:
        return " ".join(tranx_tokens(code)) if self.settings["tokenize"] == "tranx" else code

    def pair(self, candidate: str, reference: str) -> float:
        return self.joint(candidate, [reference])

    def joint(self, candidate: str, references: list[str]) -> float:
        refs = [self._text(r) for r in references]
        # (at most 1: sacrebleu's exp of a sum of logs gives 100.00000000000004 for a match)
        return min(1.0, self._metric.sentence_score(self._text(candidate), refs).score / 100)

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        if self.settings["refs"] == "best":
            return single_column(self, frame, settled(best_over_references(frame, self.pair)))
        values = [self.joint(c, refs) if refs else float("nan")
                  for c, refs in zip(frame["candidate"], references_of(frame), strict=True)]
        return single_column(self, frame, settled(values))
