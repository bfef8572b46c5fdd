"""Code tokenizers shared by the token-level scorers."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def code_tokens(code: str) -> list[str]:
    """Words/numbers and single non-space symbols."""
    return _TOKEN.findall(code)


def tranx_tokens(code: str) -> list[str]:
    """The TranX ``tokenize_for_bleu_eval`` tokenizer (Yin & Neubig 2018), used by the CoNaLa
    evaluation and by JetBrains for their CoNaLa BLEU and ROUGE-L: splits at every
    non-alphanumeric character and at camelCase boundaries, and maps quotes to backticks."""
    code = re.sub(r"([^A-Za-z0-9_])", r" \1 ", code)
    code = re.sub(r"([a-z])([A-Z])", r"\1 \2", code)
    code = code.replace('"', "`").replace("'", "`")
    return code.split()


TOKENIZERS = {"code": code_tokens, "tranx": tranx_tokens}
