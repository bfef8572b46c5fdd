"""Edit similarity: 1 - normalized Levenshtein distance (Dibia et al. 2022's EDIT-SIM).

``level=char`` compares characters; ``level=token`` compares the token sequences of
:func:`~hybridmetric.scorers.tokenize.code_tokens` (identifiers, numbers, single symbols). The
distance is normalized by the longer length (rapidfuzz ``Levenshtein.normalized_distance``), so
two empty strings score 1.
"""

from __future__ import annotations

import pandas as pd
from rapidfuzz.distance import Levenshtein

from hybridmetric.scorers.base import Scorer, Setting, best_over_references, single_column
from hybridmetric.scorers.tokenize import code_tokens


class EditSim(Scorer):
    name = "edit_sim"
    needs = ("references",)
    description = "1 - normalized Levenshtein distance to the closest reference"
    settings_spec = {
        "level": Setting("char", "compare characters or tokens", choices=("char", "token")),
    }
    packages = ("rapidfuzz",)

    def pair(self, candidate: str, reference: str) -> float:
        if self.settings["level"] == "token":
            return Levenshtein.normalized_similarity(code_tokens(candidate), code_tokens(reference))
        return Levenshtein.normalized_similarity(candidate, reference)

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        return single_column(self, frame, best_over_references(frame, self.pair))
