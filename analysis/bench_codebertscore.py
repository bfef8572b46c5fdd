"""Speed of our CodeBERTScore against ``code_bert_score.score`` (0.4.1), side by side in one run.

Both tools score the same pairs with the same local model (the embedded all-MiniLM-L6-v2) and
layer, on the same machine, one after the other; each timing includes loading the model, as a
user's call does. The reference package needs two repairs to run with contexts on a BERT
tokenizer (see analysis/codebertscore_parity.py); they don't change its work.

- (a) distinct CoNaLa (output, reference) pairs with the intent as context, float32 exact mode
  on both (target: ours >= 1.3x faster);
- (b) HumanEval: 161 problems x k Codex samples sharing their problem's reference, with the
  description as context; ours in bfloat16 fast mode, the reference in float32 (it has no other)
  (target >= 4x); the F1 drift of bfloat16 from our float32 is reported (mean and max);
- tokens per second of ours against its encoder-only ceiling: the seconds of ours's own forward
  passes through the encoder (timed by hooks on the model in the same run), without loading,
  tokenizing, matching or bookkeeping; "of ceiling" is the share of ours's time they take.

Default sizes finish in a few minutes on 2 cores; ``--full`` runs (a) 1,000 pairs and (b) 20
samples per problem (3,220 pairs).

Measured 2026-12-06 on the 2-core CPU machine (shared: load average 1.6 at the start, 3.3 at the
end), default sizes: (a) 300 pairs, 10.9 s vs 4.8 s, 2.28x; (b) 161x3, 147.8 s vs 6.2 s,
23.76x, bf16 F1 drift from fp32 mean 2.0e-4, max 9.8e-4; ours's forward passes took 96% (a)
and 91% (b) of its time. The "fp32 parity" column of (b) shows the reference's batch
dependence on texts over 512 tokens (see analysis/codebertscore_parity.py).

Run: ``.venv/bin/python analysis/bench_codebertscore.py [--full]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hybridmetric import anchors
from hybridmetric.scorers.codebertscore import CodeBertScore, embedded_model_path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
CONALA = SHARED / "conala-human-grades" / "conala" / "conala-human-grades.json"
HUMANEVAL = SHARED / "codebertscore-humaneval" / "evaluation" / "data" / \
    "humaneval_python_davinci-0.8-keep"
SYSTEMS = ("baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex")


def reference(frame: pd.DataFrame, layer: int) -> tuple[np.ndarray, float]:
    """code_bert_score.score with contexts (see hybridmetric.anchors); scores and seconds."""
    started = time.perf_counter()
    scores = anchors.code_bert_score(frame["candidate"].tolist(),
                                     [refs[0] for refs in frame["references"]],
                                     embedded_model_path(), layer, frame["context"].tolist())
    return scores, time.perf_counter() - started


def ours(frame: pd.DataFrame, dtype: str) -> tuple[np.ndarray, float, float, int]:
    """Our scores, our seconds (model load included), the seconds of the encoder's forward
    passes among them, and the tokens of the distinct texts encoded."""
    started = time.perf_counter()
    scorer = CodeBertScore(dtype=dtype, device="cpu")
    scorer._load()
    forward = [0.0, 0.0]  # (when the pass started, seconds so far)
    scorer._model.register_forward_pre_hook(
        lambda *_: forward.__setitem__(0, time.perf_counter()))
    scorer._model.register_forward_hook(
        lambda *_: forward.__setitem__(1, forward[1] + time.perf_counter() - forward[0]))
    scores = scorer.score(frame).to_numpy()
    seconds = time.perf_counter() - started
    texts = {f"{x.strip()} \n{c.strip()}" for x, c in zip(frame["context"], frame["candidate"],
                                                         strict=True)}
    texts |= {f"{x.strip()} \n{refs[0].strip()}" for x, refs in zip(frame["context"],
                                                                     frame["references"],
                                                                     strict=True)}
    tokens = sum(len(scorer._tokenizer(text, verbose=False)["input_ids"]) for text in texts)
    return scores, seconds, forward[1], tokens


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Contexts in the tokenizer's decoded form, so the reference finds their end (same ids)."""
    frame["context"] = anchors.decoded_form(frame["context"].tolist(), embedded_model_path())
    return frame


def conala_pairs(count: int) -> pd.DataFrame:
    items = json.loads(CONALA.read_text())
    rows, seen = [], set()
    for item in items:
        for system in SYSTEMS:
            key = (item["intent"], item[system], item["snippet"][0])
            if key not in seen:
                seen.add(key)
                rows.append({"candidate": item[system], "references": [item["snippet"][0]],
                             "context": item["intent"]})
    if len(rows) < count:
        sys.exit(f"only {len(rows)} distinct CoNaLa pairs")
    return normalise(pd.DataFrame(rows[:count]))


def humaneval_tasks(per_problem: int) -> pd.DataFrame:
    meta = json.loads((HUMANEVAL / "humaneval_meta.json").read_text())
    lines = {name: (HUMANEVAL / f"humaneval_{name}.txt").read_text().split("\n")
             for name in ("hyps", "refs", "srcs")}
    taken: dict[int, int] = {}
    rows = []
    for line, (problem, _) in sorted(meta["line_info"].items(), key=lambda kv: int(kv[0])):
        if taken.get(problem, 0) < per_problem:
            taken[problem] = taken.get(problem, 0) + 1
            i = int(line)
            rows.append({"task_id": problem, "candidate": lines["hyps"][i],
                         "references": [lines["refs"][i]], "context": lines["srcs"][i]})
    return normalise(pd.DataFrame(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=300, help="(a) distinct CoNaLa pairs")
    parser.add_argument("--samples", type=int, default=3, help="(b) samples per problem")
    parser.add_argument("--full", action="store_true", help="(a) 1,000 pairs, (b) 20 samples")
    args = parser.parse_args()
    if args.full:
        args.pairs, args.samples = 1000, 20
    if not CONALA.is_file() or not HUMANEVAL.is_dir():
        sys.exit(f"needs ../shared/data beside the repository ({SHARED})")
    print(f"torch threads: {torch.get_num_threads()}, load average at start: "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    a = conala_pairs(args.pairs)
    theirs_a, t_ref_a = reference(a, CodeBertScore().layer)
    mine_a, t_ours_a, t_ceiling_a, tokens_a = ours(a, "float32")
    rows.append((f"(a) CoNaLa {len(a)} distinct pairs, fp32", t_ref_a, t_ours_a, tokens_a,
                 t_ceiling_a, 1.3, np.abs(mine_a - theirs_a).max()))
    b = humaneval_tasks(args.samples)
    theirs_b, t_ref_b = reference(b, CodeBertScore().layer)
    mine_b, t_ours_b, t_ceiling_b, tokens_b = ours(b, "bfloat16")
    exact_b, *_ = ours(b, "float32")
    drift = np.abs(mine_b[:, 2] - exact_b[:, 2])
    rows.append((f"(b) HumanEval {b['task_id'].nunique()}x{args.samples} shared refs, bf16",
                 t_ref_b, t_ours_b, tokens_b, t_ceiling_b, 4.0, np.abs(exact_b - theirs_b).max()))
    print(f"\n{'case':42s} {'reference s':>11s} {'ours s':>7s} {'ratio':>6s} {'target':>6s} "
          f"{'ours tok/s':>10s} {'ceiling tok/s':>13s} {'of ceiling':>10s} {'fp32 parity':>11s}")
    for label, t_ref, t_ours, tokens, t_ceiling, target, parity in rows:
        print(f"{label:42s} {t_ref:11.1f} {t_ours:7.1f} {t_ref / t_ours:5.2f}x {target:5.1f}x "
              f"{tokens / t_ours:10.0f} {tokens / t_ceiling:13.0f} "
              f"{t_ceiling / t_ours:10.0%} {parity:11.1e}")
    print(f"\n(b) bf16 F1 drift from fp32: mean {drift.mean():.2e}, max {drift.max():.2e} "
          f"over {len(drift)} rows")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print("tokens/s count each distinct text's tokens once; ours includes model load, "
          "tokenizing and matching; the ceiling is its encoder's forward passes alone.")


if __name__ == "__main__":
    main()
