"""chrF (Popović 2015) at sentence level, by sacrebleu, on a 0-1 scale.

With several references the best-scoring one is kept; an empty candidate or reference scores 0
(sacrebleu's convention). Defaults are sacrebleu's (character
n-grams up to 6, no word n-grams, beta 2), which reproduce the JetBrains CoNaLa chrF values.
"""

from __future__ import annotations

import pandas as pd
from sacrebleu.metrics import CHRF

from hybridmetric.scorers.base import (
    Scorer,
    Setting,
    best_over_references,
    settled,
    single_column,
)


class Chrf(Scorer):
    name = "chrf"
    version = "2"  # 2: settled (rounded to 12 decimals)
    needs = ("references",)
    description = "character n-gram F-score (sacrebleu sentence chrF / 100)"
    settings_spec = {
        "char_order": Setting(6, "largest character n-gram", at_least=1),
        "word_order": Setting(0, "largest word n-gram (2 gives chrF++)", at_least=0),
        "beta": Setting(2, "recall weight", at_least=0),
        "whitespace": Setting(False, "keep whitespace in character n-grams"),
    }
    packages = ("sacrebleu",)

    def __init__(self, **settings: object):
        super().__init__(**settings)
        s = self.settings
        self._metric = CHRF(char_order=s["char_order"], word_order=s["word_order"],
                            beta=s["beta"], whitespace=s["whitespace"])

    def pair(self, candidate: str, reference: str) -> float:
        return self._metric.sentence_score(candidate, [reference]).score / 100

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        return single_column(self, frame, settled(best_over_references(frame, self.pair)))
