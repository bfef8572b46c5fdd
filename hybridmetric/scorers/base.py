"""The scorer contract: a small abstract base, typed settings, and a signature.

A scorer reads rows of the generation table and returns one column per part, named
``score.<name>`` or ``score.<name>.<part>``. Rows a scorer cannot apply to (no references for a
similarity scorer, no tests for pass_rate) get NaN: "not applicable", never a made-up score.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from hybridmetric.schema import DEFAULT_LANGUAGE, SCORE_PREFIX, row_label
from hybridmetric.signature import environment, signature

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
#: The texts of a record that a similarity scorer may read (see :func:`check_text_lengths`).
TEXT_FIELDS = ("candidate", "references", "context")


@dataclass(frozen=True)
class Setting:
    """One setting of a scorer: its default (which fixes its type), help and allowed values."""

    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    kind: type | None = None  # when the default is None, the type of a given value
    signed: bool = True  # in the signature; False only where no number can depend on it
    at_least: float | None = None  # the smallest value a number may take

    @property
    def type(self) -> type:
        return self.kind or type(self.default)

    def parse(self, name: str, value: Any) -> Any:
        """Coerce a value (possibly a command-line string) to this setting's type."""
        wanted = self.type
        if (isinstance(value, str) and self.default is None
                and value.strip().lower() in ("", "none", "null")):
            return None  # (as the command line and a signature write no value)
        if isinstance(value, str) and wanted is not str:
            text = value.strip().lower()
            try:
                if wanted is bool:
                    if text not in _TRUE | _FALSE:
                        raise ValueError
                    value = text in _TRUE
                else:
                    value = wanted(value)
            except ValueError:
                raise ValueError(
                    f"setting '{name}' expects {wanted.__name__}, got {value!r}"
                ) from None
        if isinstance(value, bool) and wanted is not bool:  # (a bool is an int to Python)
            raise ValueError(f"setting '{name}' expects {wanted.__name__}, got {value!r}")
        if value is not None and wanted is float and isinstance(value, int):
            value = float(value)
        if value is not None and not isinstance(value, wanted):
            raise ValueError(f"setting '{name}' expects {wanted.__name__}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"setting '{name}' must be a finite number, got {value!r}")
        if self.at_least is not None and value is not None and value < self.at_least:
            raise ValueError(f"setting '{name}' must be at least {self.at_least:g}, "
                             f"got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"setting '{name}' must be one of {list(self.choices)}, got {value!r}")
        return value


class Scorer(ABC):
    """Base class of every scorer. Subclasses set the class attributes and implement ``score``."""

    name: ClassVar[str]
    #: Bump when a change alters the numbers; it is part of the signature.
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    #: Column parts; empty means a single column ``score.<name>``.
    parts: ClassVar[tuple[str, ...]] = ()
    settings_spec: ClassVar[dict[str, Setting]] = {}
    #: Distributions whose versions enter the signature.
    packages: ClassVar[tuple[str, ...]] = ()
    #: The optional record fields a row needs for a value (``references``, ``tests``); a row
    #: without them gets NaN. ``hybridmetric scorers`` lists them, and ``score`` names them when
    #: a scorer gave no value on any row.
    needs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **settings: Any):
        unknown = set(settings) - set(self.settings_spec)
        if unknown:
            valid = ", ".join(sorted(self.settings_spec)) or "(none)"
            raise ValueError(
                f"scorer '{self.name}' has no setting {sorted(unknown)}; valid settings: {valid}"
            )
        self.settings: dict[str, Any] = {
            key: spec.parse(f"{self.name}.{key}", settings[key]) if key in settings
            else spec.default for key, spec in self.settings_spec.items()
        }

    @classmethod
    def column_names(cls, name: str | None = None) -> list[str]:
        """The columns ``score`` returns: ``score.<name>`` or ``score.<name>.<part>``, where
        ``name`` is the scorer's name or the alias it runs under."""
        base = SCORE_PREFIX + (name or cls.name)
        return [f"{base}.{part}" for part in cls.parts] if cls.parts else [base]

    @property
    def columns(self) -> list[str]:
        return self.column_names(self.alias)

    @property
    def detail_columns(self) -> list[str]:
        """Non-score columns of per-row details (``outcomes.<alias>``) that ``score`` also
        returns, holding JSON values; none by default."""
        return []

    @property
    def alias(self) -> str:
        """The name this instance's columns carry (the scorer's name unless renamed)."""
        return getattr(self, "_alias", self.name)

    @alias.setter
    def alias(self, value: str) -> None:
        self._alias = value

    def check(self, frame: pd.DataFrame) -> None:  # noqa: B027 - most scorers take any row
        """Raise ValueError, naming the row and field, for a row this scorer cannot score;
        called on the whole table before any row is scored."""

    def prepare(self, frame: pd.DataFrame) -> None:  # noqa: B027 - most scorers need nothing
        """Compute what depends on the whole table (CodeBERTScore's idf over its references),
        for the ``score`` calls that follow on chunks of its rows; called once per run, after
        :meth:`check`, with every row (those a resumed run has scored too)."""

    @abstractmethod
    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Score the rows of ``frame``; return a frame with ``self.columns``, indexed like it."""

    def signature_fields(self) -> dict[str, Any]:
        """Everything that fixes this scorer's numbers, beyond its settings (override to add)."""
        return {}

    def signature(self) -> str:
        fields: dict[str, Any] = {"scorer": self.name, "v": self.version}
        if self.alias != self.name:
            fields["as"] = self.alias
        fields.update({name: value for name, value in self.settings.items()
                       if self.settings_spec[name].signed})
        fields.update(self.signature_fields())
        fields.update(environment(self.packages))
        return signature(fields)

    def close(self) -> None:
        """Release held resources (models, worker processes)."""

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.settings.items())
        return f"{type(self).__name__}({settings})"


def references_of(frame: pd.DataFrame) -> list[list[str]]:
    """The reference lists of each row (a list, a tuple or an array: what Parquet gives); an
    absent cell is an empty list."""
    if "references" not in frame.columns:
        return [[] for _ in range(len(frame))]
    return [list(refs) if isinstance(refs, list | tuple | np.ndarray) else []
            for refs in frame["references"]]


def check_text_lengths(frame: pd.DataFrame, setting: str, limit: int, cost: str,
                       fields: Collection[str] = TEXT_FIELDS) -> None:
    """Raise ValueError, naming the row and field, for the first text of ``fields`` (those the
    scorer reads, of :data:`TEXT_FIELDS`) longer than ``limit`` characters (the scorer's
    ``setting``, whose ``cost`` per text says why): a scorer whose memory grows with a text's
    length would otherwise be killed outright by the kernel, naming nothing."""
    unknown = sorted(set(fields) - set(TEXT_FIELDS))
    if unknown:
        raise ValueError(f"check_text_lengths: no text field {unknown}; fields: {TEXT_FIELDS}")
    columns = {
        "candidate": [[text] for text in frame["candidate"]],
        "references": references_of(frame),
        "context": [[text] for text in frame["context"]] if "context" in frame.columns else None,
    }
    checked = [(field, columns[field]) for field in TEXT_FIELDS
               if field in fields and columns[field] is not None]
    for position in range(len(frame)):
        for field, column in checked:
            longest = max((len(t) for t in column[position] if isinstance(t, str)), default=0)
            if longest > limit:
                raise ValueError(
                    f"{row_label(frame, position)}, field '{field}': a text of {longest:,} "
                    f"characters, more than {setting} ({limit:,}): {cost}; --set "
                    f"{setting}=N takes longer texts where the memory is there")


def languages_of(frame: pd.DataFrame) -> list[str]:
    """Each row's language; an absent column or cell is the record's default (python)."""
    if "language" not in frame.columns:
        return [DEFAULT_LANGUAGE] * len(frame)
    return [language if isinstance(language, str) else DEFAULT_LANGUAGE
            for language in frame["language"]]


def best_over_references(
    frame: pd.DataFrame, pair_score: Callable[[str, str], float]
) -> np.ndarray:
    """For each row, the best ``pair_score(candidate, reference)`` over its references.

    Rows with no references get NaN.
    """
    scores = np.full(len(frame), np.nan)
    for i, (candidate, refs) in enumerate(zip(frame["candidate"], references_of(frame),
                                              strict=True)):
        if refs:
            scores[i] = max(pair_score(candidate, ref) for ref in refs)
    return scores


#: The decimals that a score made in several floating-point steps keeps (:func:`settled`).
SETTLED_DECIMALS = 12


def settled(values: Sequence[float]) -> np.ndarray:
    """``values`` rounded to :data:`SETTLED_DECIMALS`. A score made in several floating-point
    steps (an F-measure of ratios, a geometric mean, a weighted sum) can come out a unit in the
    last place apart for two pairs whose exact scores are equal (ROUGE-L's 4/5 as
    0.7999999999999999 and 0.8, chrF's 5/96 as 0.05208333333333332 and 0.05208333333333333),
    which splits a tie that the rank correlations count; twelve decimals are far finer than any
    difference these metrics make between two texts."""
    return np.round(np.asarray(values, dtype=float), SETTLED_DECIMALS)


def single_column(scorer: Scorer, frame: pd.DataFrame, values: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({scorer.columns[0]: np.asarray(values, dtype=float)}, index=frame.index)
