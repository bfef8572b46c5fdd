"""CodeBLEU (Ren et al. 2020, arXiv 2009.10297) by the ``codebleu`` package, per output.

CodeBLEU = a * BLEU + b * keyword-weighted BLEU + c * AST match + d * data-flow match. Per its
package, the data-flow component is 0 when the reference has no data flow (common for one-line
snippets such as ``os.getcwd()``), which caps such a snippet's CodeBLEU at 0.75; the signature says
``dataflow_empty:0``. Two empty strings score 0.5 (their syntax trees match). Each row is scored
against each reference alone and the best is kept. Languages other than Python need their
tree-sitter grammar package installed (``tree-sitter-<language>``).
"""

from __future__ import annotations

import logging

import pandas as pd
from codebleu import calc_codebleu
from codebleu.utils import AVAILABLE_LANGS

from hybridmetric.scorers.base import Scorer, Setting, references_of, single_column
from hybridmetric.scorers.tokenize import TOKENIZERS

#: Record ``language`` names that differ from codebleu's.
LANGUAGE_ALIASES = {"js": "javascript", "c++": "cpp", "csharp": "c_sharp", "c#": "c_sharp"}


def _weights(text: str) -> tuple[float, float, float, float]:
    try:
        weights = tuple(float(w) for w in text.split(","))
    except ValueError:
        weights = ()
    if len(weights) != 4 or min(weights) < 0:
        raise ValueError(f"codebleu weights must be 4 non-negative numbers 'a,b,c,d', got {text!r}")
    return weights  # type: ignore[return-value]


class CodeBleu(Scorer):
    name = "codebleu"
    description = "CodeBLEU: n-gram, weighted n-gram, AST and data-flow match (codebleu package)"
    settings_spec = {
        "weights": Setting("0.25,0.25,0.25,0.25", "weights of the four components, 'a,b,c,d'"),
        "tokenizer": Setting("whitespace", "tokens for the two n-gram components",
                             choices=("whitespace", *TOKENIZERS)),
    }
    packages = ("codebleu", "tree-sitter", "tree-sitter-python")

    def __init__(self, **settings: object):
        super().__init__(**settings)
        self._weights = _weights(self.settings["weights"])
        name = self.settings["tokenizer"]
        self._tokenizer = None if name == "whitespace" else TOKENIZERS[name]

    def signature_fields(self) -> dict[str, object]:
        return {"refs": "best", "dataflow_empty": 0}

    def _language(self, language: str) -> str:
        lang = LANGUAGE_ALIASES.get(language.lower(), language.lower())
        if lang not in AVAILABLE_LANGS:
            raise ValueError(
                f"codebleu does not support language {language!r}; supported: {AVAILABLE_LANGS}"
            )
        return lang

    def pair(self, candidate: str, reference: str, language: str) -> float:
        lang = self._language(language)
        try:
            result = calc_codebleu([reference], [candidate], lang=lang, weights=self._weights,
                                   tokenizer=self._tokenizer)
        except (ImportError, ModuleNotFoundError) as error:
            raise RuntimeError(
                f"codebleu needs the tree-sitter grammar for {lang}: "
                f"pip install tree-sitter-{lang.replace('_', '-')} ({error})"
            ) from error
        return float(result["codebleu"])

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # codebleu logs a warning for every snippet without data flow
        try:
            values = [
                max(self.pair(candidate, ref, language) for ref in refs) if refs else float("nan")
                for candidate, refs, language in zip(
                    frame["candidate"], references_of(frame), frame["language"], strict=True)
            ]
        finally:
            root.setLevel(level)
        return single_column(self, frame, values)
