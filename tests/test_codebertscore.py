"""CodeBERTScore: hand-checked matching, parity with code-bert-score 0.4.1, and the fast paths."""

from __future__ import annotations

import functools
import json
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hybridmetric import anchors
from hybridmetric.scorers import get
from hybridmetric.scorers.codebertscore import (
    CodeBertScore,
    embedded_model_path,
    idf_from_corpus,
    is_punctuation,
    load_idf_file,
    resolve_device,
    resolve_dtype,
    window_spans,
)

COLUMNS = [f"score.codebertscore.{p}" for p in ("precision", "recall", "f1", "f3")]
CONALA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "conala-human-grades"
          / "conala" / "conala-human-grades.json")
CODE = [
    ("os.kill(os.getpid(), signal.SIGUSR1)", "os.kill(os.getpid(), signal.SIGUSR1)",
     "send a signal `signal.SIGUSR1` to the current process"),
    ("sorted(d.items(), key=lambda x: x[1])", "sorted(list(d.items()), key=operator.itemgetter(1))",
     "Sort a dictionary `d` by value"),
    ("df.drop('a', axis=1)", "df = df.drop(columns=['a'])", "drop column 'a' from dataframe df"),
    ("x = [i for i in range(10)]", "x = list(range(10))", None),
    ("return app.run(debug = True)", "app.run(debug=True)", "enable debug mode on Flask app"),
    ("...", "print('hello')", "print hello"),
]


@pytest.fixture(scope="module")
def scorer() -> CodeBertScore:
    """The default scorer (embedded model, context on), shared to load the model once."""
    return CodeBertScore(device="cpu")


def frame_of(rows: list[tuple[str, str, str | None]]) -> pd.DataFrame:
    return pd.DataFrame({"candidate": [c for c, _, _ in rows],
                         "references": [[r] for _, r, _ in rows],
                         "context": [x for _, _, x in rows]})


def reference_scores(cands, refs, layer, sources=None, idf=False, no_punc=True) -> np.ndarray:
    """code_bert_score.score (repaired, see hybridmetric.anchors) as (n, 4) P/R/F1/F3."""
    pytest.importorskip("code_bert_score")
    return anchors.code_bert_score(cands, refs, embedded_model_path(), layer, sources, idf=idf,
                                   no_punc=no_punc, batch_size=64)


def normalise(texts: list[str]) -> list[str]:
    return anchors.decoded_form(texts, embedded_model_path())


# -- pure helpers ---------------------------------------------------------------------------------

def test_window_spans_match_the_reference_package():
    utils = pytest.importorskip("code_bert_score.utils")
    for length in (1, 511, 512, 513, 700, 1023, 1024, 1500, 2049):
        assert window_spans(length, 512) == utils.get_window_indices(length, 512, 0.5)
    for length in (513, 1500):
        covered = [s + k for s, _, lo, hi in window_spans(length, 512) for k in range(lo, hi)]
        assert covered == list(range(length))  # every token once, in order


def test_punctuation_rule_matches_the_reference_package():
    utils = pytest.importorskip("code_bert_score.utils")
    tokens = ["(", ")", "Ġ(", "Ċ", "+", "==", "x", "##.", "[CLS]", "'", "Ġ+=", "a.b", "->"]
    expected = [not keep for keep in utils.mark_all_punc_tokens(tokens).tolist()]
    assert [is_punctuation(t) for t in tokens] == expected


def test_idf_from_corpus_by_hand():
    table = idf_from_corpus([[1, 2, 2], [1, 3], [1]])
    assert table[1] == pytest.approx(np.log(4 / 4))
    assert table[2] == pytest.approx(np.log(4 / 2))
    assert table[3] == pytest.approx(np.log(4 / 2))


def test_idf_pickle_refuses_objects(tmp_path):
    path = tmp_path / "idf.pkl"
    path.write_bytes(pickle.dumps(pd.Timestamp("2020-01-01")))
    with pytest.raises(pickle.UnpicklingError, match="plain dict"):
        load_idf_file(str(path))
    path.write_bytes(pickle.dumps({5: 1.5, 7: 0.25}))
    assert load_idf_file(str(path)) == {5: 1.5, 7: 0.25}


# -- device and dtype -----------------------------------------------------------------------------

def test_device_resolution(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="no cuda device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cpu") == "cpu"


def test_dtype_resolution(monkeypatch):
    assert resolve_dtype("auto", "cpu") == "float32"
    assert resolve_dtype("auto", "mps") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_dtype("auto", "cuda") == "bfloat16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert resolve_dtype("auto", "cuda") == "float16"
    assert resolve_dtype("float16", "cuda") == "float16"
    with pytest.raises(ValueError, match="float16 needs a CUDA device"):
        resolve_dtype("float16", "cpu")
    with pytest.raises(ValueError, match="float16 needs a CUDA device"):
        CodeBertScore(dtype="float16", device="cpu")


def test_bfloat16_on_cpu_is_close_to_float32(scorer):
    frame = frame_of(CODE)
    exact = scorer.score(frame).to_numpy()
    fast = CodeBertScore(dtype="bfloat16", device="cpu")
    assert fast.dtype == "bfloat16"
    approx = fast.score(frame).to_numpy()
    assert next(fast._model.parameters()).dtype == torch.bfloat16
    assert np.abs(approx - exact).max() < 0.03
    assert not np.array_equal(approx, exact)


# -- hand-made matching ---------------------------------------------------------------------------

def test_identical_code_scores_one(scorer):
    rows = [(c, c, x) for c, _, x in CODE]
    out = scorer.score(frame_of(rows)).to_numpy()
    # exactly 1, every one (float32 noise would leave some at 0.99999988 or 1.0000001, and equal
    # texts would be ranked by it)
    assert (out[:-1] == 1.0).all(), out[:-1]
    assert (out[-1] == 0).all()  # "..." is all punctuation: nothing left to match


def test_prefix_candidate_at_layer_zero_by_hand():
    """Layer 0 embeddings depend only on token and position: a prefix matches itself exactly."""
    reference, candidate = "total = price * count + tax", "total = price"
    scorer = CodeBertScore(layer=0, no_punc=False, use_context=False, device="cpu")
    out = scorer.score(frame_of([(candidate, reference, None)])).to_numpy()[0]
    tokenizer, model = scorer._tokenizer, scorer._model
    with torch.no_grad():
        ref_ids = torch.tensor([tokenizer(reference)["input_ids"]])
        cand_ids = torch.tensor([tokenizer(candidate)["input_ids"]])
        ref_emb = model.embeddings(input_ids=ref_ids)[0].double().numpy()
        cand_emb = model.embeddings(input_ids=cand_ids)[0].double().numpy()
    ref_emb /= np.linalg.norm(ref_emb, axis=1, keepdims=True)
    cand_emb /= np.linalg.norm(cand_emb, axis=1, keepdims=True)
    sim = cand_emb @ ref_emb.T
    recall = sim.max(axis=0)[1:-1].mean()  # [CLS] and [SEP] weigh 0
    assert out[0] == pytest.approx(1.0, abs=1e-6)
    assert out[1] == pytest.approx(recall, abs=1e-6)
    assert out[1] < 0.95
    assert out[2] == pytest.approx(2 * recall / (1 + recall), abs=1e-6)
    assert out[3] == pytest.approx(10 * recall / (9 + recall), abs=1e-6)


def test_context_tokens_are_excluded_but_shape_the_embeddings(scorer):
    context, code = "Sort the LIST `xs` in reverse order", "xs.sort(reverse=True)"
    scorer.score(frame_of([(code, code, context), (code, code, None)]))
    with_context, without = scorer._cache[(context, code)], scorer._cache[("", code)]
    assert with_context.ids == without.ids  # same matched tokens: the intent's are gone
    assert not torch.allclose(with_context.embeddings, without.embeddings, atol=1e-3)
    other = "sorted(xs)[::-1]"
    out = scorer.score(frame_of([(other, code, context), (other, code, None)])).to_numpy()
    assert abs(out[0, 2] - out[1, 2]) > 1e-4


def test_missing_references_give_nan_and_empty_candidate_zero(scorer):
    frame = pd.DataFrame({"candidate": ["x = 1", "", "y = 2"],
                          "references": [None, ["x = 1"], []],
                          "context": ["set x", "set x", None]})
    out = scorer.score(frame)
    assert out.index.equals(frame.index) and list(out.columns) == COLUMNS
    assert out.iloc[0].isna().all() and out.iloc[2].isna().all()
    assert (out.iloc[1] == 0).all()


def test_cache_dedups_shared_references_and_persists(scorer):
    frame = pd.DataFrame({"candidate": ["a = 1", "a = 2", "a = 1", "b = 3"],
                          "references": [["a = 1 + 0"]] * 4, "context": ["make a"] * 4})
    scorer._cache.clear()
    first = scorer.score(frame)
    assert scorer.last_run == {"texts": 4, "encoded": 4, "cache_hits": 0}
    second = scorer.score(frame)
    assert scorer.last_run == {"texts": 4, "encoded": 0, "cache_hits": 4}
    pd.testing.assert_frame_equal(first, second)
    assert first.iloc[0].tolist() == first.iloc[2].tolist()


def test_idf_file_weights_apply(tmp_path, scorer):
    scorer._load()
    tokenizer = scorer._tokenizer
    path = tmp_path / "idf.json"
    # [CLS]/[SEP] weigh 0 and every other token (absent: the file's largest weight) weighs 2,
    # which normalises to idf off.
    path.write_text(json.dumps({tokenizer.cls_token_id: 0.0, tokenizer.sep_token_id: 0.0,
                                "1000": 2.0}))
    frame = frame_of(CODE[:4])
    weighted = CodeBertScore(idf=str(path), device="cpu").score(frame)
    np.testing.assert_allclose(weighted.to_numpy(), scorer.score(frame).to_numpy(), atol=1e-9)
    refs_idf = CodeBertScore(idf="refs", device="cpu").score(frame)
    assert np.abs(refs_idf.to_numpy() - weighted.to_numpy()).max() > 1e-3
    # a file that leaves [CLS]/[SEP] out: they still weigh 0, as in code_bert_score's tables
    path.write_text(json.dumps({"1000": 2.0}))
    no_specials = CodeBertScore(idf=str(path), device="cpu").score(frame)
    np.testing.assert_allclose(no_specials.to_numpy(), weighted.to_numpy(), atol=1e-9)


def test_refs_idf_is_the_whole_table_s_however_it_is_chunked(tmp_path):
    """idf=refs weighs tokens by their document frequency over the whole table's references
    (prepare, which scoring calls once): chunks of one task each score as the whole does (over
    one task's reference alone, every reference token would weigh log(2/2) = 0); a table with
    no reference at all gives NaN, not an error."""
    from hybridmetric.scoring import score

    frame = frame_of(CODE[:5]).assign(task_id=[f"t{i}" for i in range(5)])
    build = [CodeBertScore(idf="refs", device="cpu")]
    whole = score(frame, build, progress=False)[COLUMNS].to_numpy()
    chunked = score(frame, build, tmp_path / "c.jsonl", chunk_size=1,
                    progress=False)[COLUMNS].to_numpy()
    np.testing.assert_allclose(chunked, whole, atol=1e-6)
    alone = build[0].score(frame.iloc[:1])  # (the table it was prepared on: same numbers)
    np.testing.assert_allclose(alone.to_numpy()[0], whole[0], atol=1e-6)
    assert whole[:, 2].min() > 0.3
    empty = frame.assign(references=[[]] * 5)
    assert np.isnan(score(empty, [CodeBertScore(idf="refs", device="cpu")],
                          progress=False)[COLUMNS].to_numpy()).all()


def test_a_row_scores_the_same_whatever_it_is_scored_with(tmp_path):
    """A text's embeddings do not depend on the other texts of its encoder batch (each is
    padded to its own width), so scoring rows in chunks of one gives, to the last digit, what
    scoring them all at once gives (the rounded float32 noise once showed in the 6th decimal)."""
    from hybridmetric import read_study
    from hybridmetric.scoring import score

    frame = read_study(Path(__file__).resolve().parents[1] / "studies" / "conala").generations
    frame = frame.iloc[:120].reset_index(drop=True)
    whole = score(frame, [CodeBertScore(device="cpu")], progress=False)[COLUMNS].to_numpy()
    chunked = score(frame, [CodeBertScore(device="cpu")], tmp_path / "c.jsonl", chunk_size=1,
                    progress=False)[COLUMNS].to_numpy()
    np.testing.assert_array_equal(chunked, whole)


def test_the_encoder_leaves_torch_s_threads_as_it_found_them():
    """On the CPU each forward pass runs on one thread (see _run_encoder) for the encoding
    alone: torch's own setting comes back, after an error too, and the passes not started by
    then are dropped."""
    import torch

    from hybridmetric.scorers.codebertscore import _run_encoder

    before = torch.get_num_threads()
    seen = _run_encoder([lambda: {0: torch.get_num_threads()}, lambda: {1: 1}], on_cpu=True)
    assert seen == {0: 1, 1: 1} and torch.get_num_threads() == before

    def fails() -> dict:
        raise RuntimeError("the encoder failed")

    ran = []

    def slow(k: int) -> dict:
        time.sleep(0.01)
        ran.append(k)
        return {k: k}

    # (the passes after a failure are dropped, as after Ctrl-C, not run to the end)
    with pytest.raises(RuntimeError, match="the encoder failed"):
        _run_encoder([fails] + [functools.partial(slow, k) for k in range(100)], on_cpu=True)
    assert torch.get_num_threads() == before and len(ran) < 50


def test_the_model_hash_covers_the_tokenizer_s_settings(tmp_path):
    """The window (model_max_length) and the casing are the tokenizer's settings: a copy of the
    model that changes them signs differently."""
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(embedded_model_path(), copy)
    first = CodeBertScore(model=str(copy), layer=6).signature()
    config = copy / "tokenizer_config.json"
    settings = json.loads(config.read_text())
    settings["model_max_length"] = 128
    config.write_text(json.dumps(settings))
    assert CodeBertScore(model=str(copy), layer=6).signature() != first


def test_rescale_baseline(tmp_path, scorer):
    path = tmp_path / "baseline.csv"
    layer = scorer.layer
    path.write_text(f"LAYER,P,R,F,F3\n{layer - 1},0.1,0.2,0.3,0.4\n{layer},0.5,0.6,0.7,0.8\n")
    frame = frame_of(CODE[:3])
    raw = scorer.score(frame).to_numpy()
    rescaled = CodeBertScore(baseline=str(path), device="cpu").score(frame).to_numpy()
    base = np.array([0.5, 0.6, 0.7, 0.8])
    np.testing.assert_allclose(rescaled, (raw - base) / (1 - base), atol=1e-12)
    path.write_text(f"LAYER,P,R,F\n{layer},0.5,0.6,0.7\n")
    with pytest.raises(ValueError, match="F3"):
        CodeBertScore(baseline=str(path))


def test_settings_errors_and_signature(monkeypatch, tmp_path, scorer):
    assert get("codebertscore") is CodeBertScore
    with pytest.raises(ValueError, match="no default layer"):
        CodeBertScore(model=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such folder"):
        CodeBertScore(model=str(tmp_path / "absent"), layer=3)
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read at import: also set the live constant
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE"):
        CodeBertScore(model="no-such-org/no-such-model", layer=3).score(frame_of(CODE[:1]))
    with pytest.raises(RuntimeError, match="hf download"):  # (its signature hashes its files)
        CodeBertScore(model="no-such-org/no-such-model", layer=3).signature()
    with pytest.raises(ValueError, match="out of range"):
        CodeBertScore(layer=7, device="cpu").score(frame_of(CODE[:1]))
    with pytest.raises(FileNotFoundError, match="idf"):
        CodeBertScore(idf=str(tmp_path / "none.json"))
    signature = scorer.signature()
    for field in ("scorer:codebertscore", "model:embedded", "layer_used:", "model_hash:",
                  "dtype_used:float32", "device_class:cpu", "idf:off", "torch:", "transformers:"):
        assert field in signature


# -- parity with code-bert-score ------------------------------------------------------------------

def test_parity_without_context_and_with_idf(scorer):
    rows = [*CODE, ("", "x = 1", None), ("  \n\t", "y = 2", None)]  # empty after stripping
    cands, refs = [c for c, _, _ in rows], [r for _, r, _ in rows]
    frame = frame_of([(c, r, None) for c, r in zip(cands, refs, strict=True)])
    layer = scorer.layer
    ours = CodeBertScore(use_context=False, device="cpu").score(frame).to_numpy()
    np.testing.assert_allclose(ours, reference_scores(cands, refs, layer), atol=1e-4)
    ours_idf = CodeBertScore(use_context=False, idf="refs", device="cpu").score(frame).to_numpy()
    np.testing.assert_allclose(ours_idf, reference_scores(cands, refs, layer, idf=True), atol=1e-4)


def test_parity_with_context_on_conala_subset(scorer):
    if CONALA.is_file():
        items = json.loads(CONALA.read_text())[:8]
        rows = [(item[s], item["snippet"][0], item["intent"]) for item in items
                for s in ("baseline", "best-tranx", "codex")]
    else:
        rows = [row for row in CODE if row[2]]
    contexts = normalise([x for _, _, x in rows])
    rows = [(c, r, x) for (c, r, _), x in zip(rows, contexts, strict=True)]
    ours = scorer.score(frame_of(rows)).to_numpy()
    expected = reference_scores([c for c, _, _ in rows], [r for _, r, _ in rows], scorer.layer,
                                sources=contexts)
    np.testing.assert_allclose(ours, expected, atol=1e-4)


def test_parity_multiple_references(scorer):
    cands = ["sorted(d.items(), key=lambda x: x[1])", "df.drop('a', axis=1)"]
    refs = [["sorted(d.items(), key=operator.itemgetter(1))", "print(d)"],
            ["df = df.drop(columns=['a'])", "del df['a']", "df.pop('a')"]]
    frame = pd.DataFrame({"candidate": cands, "references": refs})
    ours = CodeBertScore(use_context=False, device="cpu").score(frame).to_numpy()
    np.testing.assert_allclose(ours, reference_scores(cands, refs, scorer.layer), atol=1e-4)


def test_parity_with_a_context_the_tokenizer_cannot_spell(scorer):
    """A context with characters outside the vocabulary (emoji: [UNK]) ends where it ends, in
    the reference tool too (its repair keeps [UNK] in the decoded context)."""
    contexts = ["intent \N{GRINNING FACE} here", "sort a list \N{FIRE} fast"]
    cands, refs = ["x = 1", "sorted(a)"], ["x = 2", "a.sort()"]
    frame = pd.DataFrame({"candidate": cands, "references": [[r] for r in refs],
                          "context": contexts})
    np.testing.assert_allclose(scorer.score(frame).to_numpy(),
                               reference_scores(cands, refs, scorer.layer, normalise(contexts)),
                               atol=1e-4)


def test_long_inputs_use_windows_not_truncation(scorer):
    body = "\n".join(f"value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 90))
    candidate, reference = body, "value_1 = compute(value_0, 1)\nvalue_2 = compute(value_1, 2)"
    scorer._load()
    tokens = len(scorer._tokenizer(candidate)["input_ids"])
    assert tokens > 2 * 512
    plain = CodeBertScore(use_context=False, no_punc=False, device="cpu")
    ours = plain.score(frame_of([(candidate, reference, None)])).to_numpy()
    assert len(plain._cache[("", candidate)].ids) == tokens  # every token kept
    expected = reference_scores([candidate], [reference], scorer.layer, no_punc=False)
    np.testing.assert_allclose(ours, expected, atol=1e-4)


def test_a_long_text_s_windows_go_through_the_encoder_batch_size_at_a_time():
    """Memory stays bounded for a runaway generation: its windows are batched as texts are,
    and the batching changes no score."""
    body = "\n".join(f"value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 400))
    frame = frame_of([(body, "value_1 = compute(value_0, 1)", None)])
    scores = {}
    for size in (2, 32):
        scorer = CodeBertScore(use_context=False, device="cpu", batch_size=size)
        scorer._load()
        forward, seen = scorer._model.forward, []

        def recorded(input_ids, *args, forward=forward, seen=seen, **kwargs):
            seen.append(len(input_ids))
            return forward(input_ids, *args, **kwargs)

        scorer._model.forward = recorded
        scores[size] = scorer.score(frame).to_numpy()
        windows = len(window_spans(len(scorer._tokenizer(body)["input_ids"]), scorer._window))
        assert windows > 5
        assert max(seen) == min(size, windows)
        assert sum(seen) == windows + 1  # (and the reference, a batch of its own)
    np.testing.assert_allclose(scores[2], scores[32], atol=1e-6)
