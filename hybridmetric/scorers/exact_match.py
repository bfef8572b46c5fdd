"""Exact match: 1 when the candidate equals one of the references, else 0."""

from __future__ import annotations

import pandas as pd

from hybridmetric.scorers.base import Scorer, Setting, best_over_references, single_column


def normalize(code: str, mode: str) -> str:
    if mode == "strip":
        return code.strip()
    if mode == "whitespace":
        return " ".join(code.split())
    return code


class ExactMatch(Scorer):
    name = "exact_match"
    needs = ("references",)
    description = "1 if the candidate equals a reference (after the chosen normalization)"
    settings_spec = {
        "normalize": Setting(
            "strip",
            "none: byte-exact; strip: ignore leading/trailing whitespace; "
            "whitespace: also collapse inner runs of whitespace",
            choices=("none", "strip", "whitespace"),
        ),
    }

    def pair(self, candidate: str, reference: str) -> float:
        mode = self.settings["normalize"]
        return float(normalize(candidate, mode) == normalize(reference, mode))

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        return single_column(self, frame, best_over_references(frame, self.pair))
