"""The anchor tools our numbers are checked against, made runnable here.

``code_bert_score`` (0.4.1, the CodeBERTScore authors' package; in the ``test`` extra) needs three
repairs to run on a BERT tokenizer under transformers 5: it encodes an empty text with
``build_inputs_with_special_tokens``, which transformers 5 removed, so we give it back as
[CLS] + ids + [SEP]; with contexts it calls ``decode(...).removeprefix(tokenizer.bos_token)`` and
BERT has no bos token, so ``bos_token`` is set to [CLS]; and it finds the context's end by
decoding token prefixes, which fails when the tokenizer lowercases, so it decodes without [CLS],
[SEP] and padding (not without every special token: an [UNK] in a context, e.g. an emoji, must
stay in its decoded form) and callers give it contexts in the tokenizer's decoded form
(:func:`decoded_form`), which encode to the same token ids. Used by the parity tests and
``analysis/`` scripts only.
"""

from __future__ import annotations

import functools
import sys

import numpy as np


def _with_specials(tokenizer, ids: list[int]) -> list[int]:
    return [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]


def _decode_without_markers(tokenizer, decode, ids, **options) -> str:
    """``decode`` of ``ids`` without the [CLS], [SEP] and padding among them."""
    markers = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    return decode([i for i in ids if i not in markers], **options)


def decoded_form(texts: list[str], model_path: str) -> list[str]:
    """Each text as the tokenizer decodes its own tokens (same ids, normalised text)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    return [tokenizer.decode(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]


def code_bert_score(cands: list[str], refs: list, model_path: str, layer: int,
                    sources: list[str] | None = None, **options) -> np.ndarray:
    """``code_bert_score.score`` (repaired, see the module docstring) as an (n, 4) array of
    P, R, F1, F3; ``options`` go to it unchanged (``idf``, ``no_punc``, ``batch_size``, ...)."""
    try:
        import code_bert_score as package
    except ImportError:
        raise ImportError("code-bert-score is not installed: pip install -e '.[test]'") from None
    import torch

    module = sys.modules["code_bert_score.score"]
    original = module.AutoTokenizer.from_pretrained

    def repaired(*args, **kwargs):
        tokenizer = original(*args, **kwargs)
        tokenizer.bos_token = tokenizer.cls_token
        tokenizer.decode = functools.partial(_decode_without_markers, tokenizer, tokenizer.decode)
        tokenizer.build_inputs_with_special_tokens = functools.partial(_with_specials, tokenizer)
        return tokenizer

    module.AutoTokenizer.from_pretrained = repaired
    try:
        out = package.score(cands, refs, model_type=model_path, num_layers=layer,
                            sources=sources, **{"device": "cpu", **options})
    finally:
        module.AutoTokenizer.from_pretrained = original
    return torch.stack(out, dim=1).double().numpy()
