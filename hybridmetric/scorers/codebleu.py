"""CodeBLEU (Ren et al. 2020, arXiv 2009.10297) by the ``codebleu`` package, per output.

CodeBLEU = a * BLEU + b * keyword-weighted BLEU + c * AST match + d * data-flow match. Per its
package, the data-flow component is 0 when the reference has no data flow (common for one-line
snippets such as ``os.getcwd()``), which caps such a snippet's CodeBLEU at 0.75; the signature says
``dataflow_empty:0``. Two empty strings score 0.5 (their syntax trees match). Each row is scored
against each reference alone and the best is kept. The tree-sitter grammars of the languages the
sandbox runs (Python, JavaScript, C++, Java) are dependencies, pinned to the last versions that
codebleu 0.7's tree-sitter (0.22) loads; the other languages codebleu knows (Go, Ruby, ...) need
theirs installed (``tree-sitter-<language><0.23``, made for tree-sitter 0.22). The package's
data-flow match iterates over sets, so its result depends on Python's string hash seed; we compute
it in a worker process started with ``PYTHONHASHSEED=0`` (``hashseed:0`` in the signature).
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

import pandas as pd
from codebleu import calc_codebleu
from codebleu.utils import AVAILABLE_LANGS, get_tree_sitter_language

from hybridmetric.schema import language_name, row_label
from hybridmetric.scorers.base import (
    Scorer,
    Setting,
    check_text_lengths,
    languages_of,
    references_of,
    settled,
    single_column,
)
from hybridmetric.scorers.tokenize import TOKENIZERS

#: The codebleu package's data-flow match depends on set iteration order, so on Python's string
#: hash seed: the same pair can score differently in two processes. Scores are computed in a
#: worker process started with this fixed seed, so that a signature fixes the numbers.
HASH_SEED = "0"
#: Seconds :meth:`CodeBLEU.close` gives the worker to end once its input ends.
CLOSE_WAIT_S = 5.0
#: Seconds between the worker's checks that the process that started it is still there.
PARENT_CHECK_S = 1.0
#: The longest text scored by default, in characters.
MAX_CHARS = 200_000
#: Record ``language`` names (as the sandbox reads them: ``py``, ``js``, ``c++``) that differ from
#: codebleu's.
LANGUAGE_ALIASES = {"csharp": "c_sharp", "c#": "c_sharp"}


def _weights(text: str) -> tuple[float, float, float, float]:
    try:
        weights = tuple(float(w) for w in text.split(","))
    except ValueError:
        weights = ()
    if (len(weights) != 4 or not all(math.isfinite(w) and w >= 0 for w in weights)
            or not math.isclose(sum(weights), 1.0)):
        raise ValueError("codebleu weights must be 4 non-negative numbers 'a,b,c,d' that sum "
                         f"to 1 (CodeBLEU is their weighted mean), got {text!r}")
    return weights  # type: ignore[return-value]


class CodeBleu(Scorer):
    name = "codebleu"
    version = "2"  # 2: settled (rounded to 12 decimals)
    needs = ("references",)
    description = "CodeBLEU: n-gram, weighted n-gram, AST and data-flow match (codebleu package)"
    settings_spec = {
        "weights": Setting("0.25,0.25,0.25,0.25", "weights of the four components, 'a,b,c,d'"),
        "tokenizer": Setting("whitespace", "tokens for the two n-gram components",
                             choices=("whitespace", *TOKENIZERS)),
        "max_chars": Setting(MAX_CHARS, "longest candidate or reference taken, in characters "
                             "(a longer one is an error naming its row)", signed=False,
                             at_least=1),
    }
    packages = ("codebleu", "tree-sitter", "tree-sitter-python", "tree-sitter-javascript",
                "tree-sitter-cpp", "tree-sitter-java")

    def __init__(self, **settings: object):
        super().__init__(**settings)
        self._weights = _weights(self.settings["weights"])
        self._process: subprocess.Popen | None = None

    def signature_fields(self) -> dict[str, object]:
        return {"refs": "best", "dataflow_empty": 0, "hashseed": HASH_SEED}

    def _language(self, language: str) -> str:
        name = language_name(language)
        lang = LANGUAGE_ALIASES.get(name, name)
        if lang not in AVAILABLE_LANGS:
            raise ValueError(
                f"codebleu does not support language {language!r}; supported: {AVAILABLE_LANGS}"
            )
        return lang

    def check(self, frame: pd.DataFrame) -> None:
        """Every row with references names a language codebleu parses, whose grammar loads, and
        no text is longer than ``max_chars``."""
        check_text_lengths(frame, "codebleu.max_chars", self.settings["max_chars"],
                           "codebleu's syntax trees and data flow grow with a text (20 MB of "
                           "code ran out of 8 GB)", fields=("candidate", "references"))
        languages: dict[str, int] = {}
        for position, (refs, language) in enumerate(zip(references_of(frame),
                                                        languages_of(frame), strict=True)):
            if refs:
                try:
                    languages.setdefault(self._language(language), position)
                except ValueError as error:
                    raise ValueError(f"{row_label(frame, position)}, field 'language': "
                                     f"{error}") from None
        for lang, position in languages.items():
            try:
                load_grammar(lang)
            except RuntimeError as error:
                raise ValueError(f"{row_label(frame, position)}, field 'language': "
                                 f"{error}") from None

    def _worker(self) -> subprocess.Popen:
        """The worker process, started with PYTHONHASHSEED fixed (see the module docstring), in
        a process group of its own: a Ctrl-C reaches the caller alone, which then ends it
        (:meth:`close`), and the worker prints no traceback of its own."""
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(os.getpid())], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True, env={**os.environ, "PYTHONHASHSEED": HASH_SEED}, process_group=0)
        return self._process

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        jobs = [([self._language(language), candidate, list(refs)] if refs else None)
                for candidate, refs, language in zip(
                    frame["candidate"], references_of(frame), languages_of(frame), strict=True)]
        worker = self._worker()
        assert worker.stdin is not None and worker.stdout is not None
        request = {"jobs": jobs, "weights": self._weights, "tokenizer": self.settings["tokenizer"]}
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        answer = worker.stdout.readline()
        if not answer:
            raise RuntimeError(f"the codebleu worker died (exit status {worker.wait()})")
        reply = json.loads(answer)
        if "job" in reply:  # (one row's: the worker goes on)
            raise ValueError(f"{row_label(frame, reply['job'])}: codebleu failed on it: "
                             f"{reply['error']}")
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return single_column(self, frame, settled(reply["values"]))

    def close(self) -> None:
        """End the worker: at once where it is idle (the end of its input); where it is still
        scoring (the caller was interrupted), it is killed."""
        if self._process is not None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def load_grammar(lang: str) -> None:
    """Load ``lang``'s tree-sitter grammar as codebleu does, or say which version to install:
    codebleu 0.7 uses tree-sitter 0.22, which cannot load the grammars made for later ones."""
    package = f"tree-sitter-{lang.replace('_', '-')}"
    advice = f"pip install '{package}<0.23' (a version made for tree-sitter 0.22)"
    try:
        get_tree_sitter_language(lang)
    except ImportError as error:
        missing = f"codebleu needs the tree-sitter grammar for {lang}: {advice}"
        raise RuntimeError(missing) from error
    except (TypeError, ValueError) as error:  # a grammar for a later tree-sitter
        raise RuntimeError(f"the installed {package} does not load in tree-sitter 0.22 "
                           f"({type(error).__name__}: {error}): {advice}") from error


def best_scores(jobs: list[list | None], weights: Sequence[float],
                tokenizer: Callable[[str], list[str]] | None) -> list[float]:
    """Each job's (``[language, candidate, references]``) best CodeBLEU over its references;
    NaN for no job. Run in the worker process."""
    for lang in {job[0] for job in jobs if job is not None}:
        load_grammar(lang)
    values = []
    for index, job in enumerate(jobs):
        if job is None:
            values.append(float("nan"))
            continue
        lang, candidate, refs = job
        try:
            values.append(max(
                float(calc_codebleu([ref], [candidate], lang=lang, weights=tuple(weights),
                                    tokenizer=tokenizer)["codebleu"]) for ref in refs))
        except Exception as error:  # noqa: BLE001 - codebleu's own, as MemoryError: the row's
            raise JobFailed(index, f"{type(error).__name__}: {error}") from error
    return values


class JobFailed(Exception):
    """A job of :func:`best_scores` that codebleu could not score: its index and why."""

    def __init__(self, index: int, why: str):
        super().__init__(why)
        self.index = index


def _end_with(parent: int) -> None:
    """End this worker once ``parent`` is gone (killed outright: SIGKILL leaves it no chance to
    close the worker's input, and a long job would run on to its end)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def serve(parent: int) -> None:
    """The worker: one JSON request a line on stdin, one JSON reply a line on stdout; it ends
    with ``parent``, the process that started it."""
    logging.disable(logging.WARNING)  # codebleu warns for every snippet without data flow
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()
    for line in sys.stdin:
        request = json.loads(line)
        name = request["tokenizer"]
        try:
            reply = {"values": best_scores(request["jobs"], request["weights"],
                                           None if name == "whitespace" else TOKENIZERS[name])}
        except JobFailed as failed:
            reply = {"error": str(failed), "job": failed.index}
        except RuntimeError as error:
            reply = {"error": str(error)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
