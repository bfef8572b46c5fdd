"""Reproduce published agreement numbers from ``../shared/data`` with hybridmetric.stats.

1. CodeBERTScore (Zhou et al. 2023, arXiv 2302.05527) Table 1, CoNaLa, for chrF, ROUGE-L and
   METEOR, from the JetBrains metric scores in ``conala-all-grades.json`` with the human score the
   mean of the raw rater grades (``conala-human-grades.json``). THEIR PROTOCOL, flagged: tau is the
   within-problem da-RR variant B (threshold 0.001, strict); Pearson and Spearman pool the rows;
   the number is the mean over 5 "test" folds built as ``scores[~subset]`` from the fold index
   arrays of their ``evaluation/constants.py``. ``~`` on an integer array is bitwise NOT
   (``-i - 1``), so each "test" fold is the 100 problems mirrored from the end of the list, not the
   complement of the dev fold. We print the mean over those folds (theirs), and beside it the same
   statistics over all 472 problems (what the folds were meant to approximate).
2. ICE-Score (Zhuo 2024, arXiv 2304.14317): example level (scipy Kendall tau-b / Pearson /
   Spearman within each problem, nan-mean over problems) and corpus level (all rows pooled), on
   CoNaLa (M-MSR aggregated grades) and HumanEval-X (execution pass/fail).

Run from the repository root: ``python analysis/reproduce_tables.py [--data ../shared/data]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from hybridmetric import stats
from hybridmetric.protocols import codebertscore_protocol

CONALA_MODELS = ["baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex"]

# Published numbers: tau, r_p, r_s.
CBS_TABLE1 = {"chrf": (0.470, 0.635, 0.623), "rougel": (0.420, 0.619, 0.574),
              "meteor": (0.366, 0.581, 0.540)}
CBS_NAMES = {"chrf": "chrF", "rougel": "ROUGE-L", "meteor": "METEOR"}

ICE_CONALA = {  # metric key: (name, example tau/r_p/r_s, corpus tau/r_p/r_s)
    "bleu": ("BLEU", (.439, .522, .488), (.423, .572, .542)),
    "codebleu": ("CodeBLEU", (.292, .363, .331), (.259, .397, .339)),
    "chrf": ("chrF", (.458, .570, .515), (.449, .592, .578)),
    "rougel": ("ROUGE-L", (.447, .529, .499), (.432, .581, .552)),
    "meteor": ("METEOR", (.410, .507, .462), (.415, .557, .534)),
    "ruby": ("RUBY", (.331, .397, .371), (.339, .493, .439)),
    "codebertscore_f1": ("CodeBERTScore-F1 (w/o S.)", (.499, .595, .558), (.460, .579, .589)),
    "codebertscore_s_f3": ("CodeBERTScore-F3 (w/ S.)", (.505, .609, .563), (.437, .549, .564)),
}
LANGUAGES = ("java", "cpp", "python", "js")
ICE_HUMANEVAL = {  # metric key: level -> tau/r_s per language (java, cpp, python, js) + average
    "bleu": ("BLEU", {
        "example": ((.337, .401), (.146, .174), (.251, .297), (.168, .199), (.225, .268)),
        "corpus": ((.267, .326), (.225, .276), (.281, .344), (.220, .270), (.248, .304))}),
    "chrf": ("chrF", {
        "example": ((.346, .413), (.166, .198), (.262, .312), (.186, .220), (.240, .286)),
        "corpus": ((.290, .355), (.266, .325), (.328, .402), (.279, .342), (.291, .356))}),
    "meteor": ("METEOR", {
        "example": ((.358, .425), (.174, .208), (.276, .327), (.195, .231), (.251, .298)),
        "corpus": ((.318, .389), (.260, .319), (.349, .427), (.311, .380), (.309, .379))}),
    "codebertscore_f3": ("CodeBERTScore-F3 (w/o S.)", {
        "example": ((.359, .429), (.169, .202), (.265, .316), (.180, .214), (.243, .290)),
        "corpus": ((.326, .399), (.283, .347), (.360, .441), (.296, .363), (.316, .387))}),
    "gpt35_nsnr": ("GPT-3.5 (w/o R.)", {
        "example": ((.427, .442), (.320, .326), (.279, .282), (.316, .321), (.336, .343))}),
    "gpt35_nswr": ("GPT-3.5 (w/ R.)", {
        "corpus": ((.412, .438), (.367, .383), (.425, .446), (.432, .455), (.409, .431))}),
}


def _load(path: Path) -> list[dict]:
    with path.open() as handle:
        return json.load(handle)


def _row(name: str, ours: tuple[float, ...], theirs: tuple[float, ...], tolerance: float) -> bool:
    ok = all(abs(round(a, 3) - b) <= tolerance + 1e-9 for a, b in zip(ours, theirs, strict=True))
    fmt = " ".join(f"{v:.3f}" for v in ours)
    pub = " ".join(f"{v:.3f}" for v in theirs)
    print(f"  {name:<36} ours {fmt}   published {pub}   {'OK' if ok else 'DIFFERS'}")
    return ok


def _three(human: np.ndarray, metric: np.ndarray, groups: np.ndarray, level: str
           ) -> tuple[float, float, float]:
    """ICE-Score's Kendall tau-b, Pearson, Spearman at ``level`` (example or corpus)."""
    if level == "corpus":
        return (stats.kendall_tau_b(metric, human), stats.pearson(metric, human),
                stats.spearman(metric, human))
    return tuple(float(np.nanmean(stats.per_group(name, human, metric, groups)))  # type: ignore
                 for name in ("kendall_tau_b", "pearson", "spearman"))


def codebertscore_table1(data: Path) -> bool:
    folder = data / "conala-human-grades" / "conala"
    raw = _load(folder / "conala-human-grades.json")
    scored = _load(folder / "conala-all-grades.json")
    if [r["intent"] for r in raw] != [s["intent"] for s in scored]:
        raise ValueError("conala-human-grades.json and conala-all-grades.json differ in order")
    problem = np.repeat(np.arange(len(raw)), len(CONALA_MODELS))
    human = np.array([np.mean(list(item[f"grade-{m}"].values()))
                      for item in raw for m in CONALA_MODELS])
    print("CodeBERTScore Table 1 (CoNaLa), tau / r_p / r_s")
    print("  THEIR PROTOCOL: da-RR tau (threshold 0.001, strict), pooled Pearson/Spearman, mean")
    print("  over 5 'test' folds scores[~subset]: bitwise NOT, so not the dev folds' complements")
    ok = True
    for key, published in CBS_TABLE1.items():
        metric = np.array([item[f"{key}-{m}"] for item in scored for m in CONALA_MODELS])
        ours = codebertscore_protocol(human, metric, problem, "test")
        ok &= _row(CBS_NAMES[key], ours, published, 0.01)
        everything = (stats.tau_darr(human, metric, problem, 0.001, inclusive=False),
                      stats.pearson(metric, human), stats.spearman(metric, human))
        print(f"  {'':<36} all 472 problems: " + " ".join(f"{v:.3f}" for v in everything))
    return ok


def ice_conala(data: Path) -> bool:
    scored = _load(data / "conala-human-grades" / "conala" / "conala-all-grades.json")
    source = data / "ice-score" / "experiment_source" / "original_output" / "conala"
    plain = _load(source / "conala_codebertscore.json")
    intent = _load(source / "conala_codebertscore_intent.json")
    if not len(scored) == len(plain) == len(intent):
        raise ValueError("the ICE-Score CodeBERTScore files do not have the 472 CoNaLa items")
    human = np.array([item[f"grade-{m}"] for item in scored for m in CONALA_MODELS], float)
    problem = np.repeat(np.arange(len(scored)), len(CONALA_MODELS))
    columns = {key: np.array([item[f"{key}-{m}"] for item in scored for m in CONALA_MODELS])
               for key in ("bleu", "codebleu", "chrf", "rougel", "meteor", "ruby")}
    columns["codebertscore_f1"] = np.array([item[f"codebertscore-{m}"]["F1"]
                                            for item in plain for m in CONALA_MODELS])
    columns["codebertscore_s_f3"] = np.array([item[f"codebertscore-{m}"]["F3"]
                                              for item in intent for m in CONALA_MODELS])
    ok = True
    for level, index in (("example", 1), ("corpus", 2)):
        print(f"ICE-Score CoNaLa, {level} level, tau / r_p / r_s (exact to 3 decimals)")
        for key, entry in ICE_CONALA.items():
            ours = _three(human, columns[key], problem, level)
            ok &= _row(entry[0], ours, entry[index], 0.0)
    return ok


def ice_humaneval(data: Path) -> bool:
    ok = True
    folder = data / "ice-score" / "data" / "humaneval"
    loaded = {lang: _load(folder / f"humaneval_{lang}_grade.json") for lang in LANGUAGES}
    for level in ("example", "corpus"):
        print(f"ICE-Score HumanEval-X, {level} level, tau / r_s for java, cpp, python, js, average")
        for key, (name, published) in ICE_HUMANEVAL.items():
            if level not in published:
                continue
            ours = []
            for lang in LANGUAGES:
                human, metric, problem = [], [], []
                for number, item in enumerate(loaded[lang]):
                    for field in item:
                        if field.startswith("grade-"):
                            k = field.removeprefix("grade-")
                            human.append(item[field]["execution"])
                            metric.append(item[f"{key}-{k}"])
                            problem.append(number)
                tau, _, rho = _three(np.array(human, float), np.array(metric, float),
                                     np.array(problem), level)
                ours.append((tau, rho))
            ours.append(tuple(np.mean(ours, axis=0)))
            rows = zip((*LANGUAGES, "average"), ours, published[level], strict=True)
            for lang, mine, theirs in rows:
                ok &= _row(f"{name} {lang}", mine, theirs, 0.0)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data", type=Path, default=default, help="the shared data folder")
    args = parser.parse_args()
    results = [codebertscore_table1(args.data), ice_conala(args.data), ice_humaneval(args.data)]
    print("all reproduced" if all(results) else "SOME NUMBERS DIFFER")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
