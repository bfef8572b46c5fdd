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

CONALA_MODELS = ["baseline", "tranx-annot", "best-tranx", "best-tranx-rerank", "codex"]

# neulab/code-bert-score evaluation/constants.py, CONALA_CV_SUBSETS (5 folds x 100 problems).
CONALA_CV_SUBSETS = np.array([
    [224, 421, 392, 380, 414, 437, 76, 20, 2, 174, 240, 355, 303, 230, 326, 328, 233, 116, 340,
     291, 425, 186, 24, 46, 74, 81, 283, 58, 360, 4, 246, 465, 356, 217, 431, 25, 214, 169, 238,
     412, 390, 204, 144, 409, 191, 69, 37, 279, 298, 407, 29, 118, 88, 222, 314, 90, 466, 251,
     415, 23, 22, 450, 158, 363, 145, 227, 387, 454, 128, 180, 15, 249, 268, 396, 339, 468, 234,
     6, 252, 402, 197, 42, 167, 153, 143, 63, 71, 470, 1, 105, 388, 209, 36, 416, 208, 205, 138,
     275, 460, 400],
    [310, 293, 371, 40, 351, 111, 117, 270, 177, 253, 420, 407, 53, 327, 462, 65, 402, 334, 262,
     453, 119, 58, 468, 410, 143, 190, 455, 221, 1, 386, 5, 367, 118, 286, 281, 174, 242, 209,
     102, 461, 247, 39, 94, 291, 20, 84, 460, 439, 136, 113, 294, 343, 122, 133, 194, 175, 256,
     359, 218, 35, 171, 305, 135, 274, 436, 85, 92, 30, 414, 2, 165, 240, 107, 466, 184, 295, 248,
     325, 257, 358, 199, 64, 347, 403, 71, 182, 428, 316, 418, 11, 114, 396, 148, 352, 196, 160,
     15, 112, 79, 388],
    [63, 233, 401, 408, 330, 34, 454, 55, 108, 160, 351, 282, 464, 176, 370, 347, 15, 72, 204, 58,
     430, 139, 349, 42, 6, 281, 92, 168, 298, 24, 66, 127, 422, 210, 207, 447, 357, 405, 318, 335,
     448, 128, 470, 208, 85, 388, 163, 36, 200, 166, 425, 167, 371, 54, 355, 239, 416, 201, 194,
     383, 364, 135, 348, 248, 468, 62, 258, 376, 363, 246, 222, 152, 377, 90, 287, 263, 186, 53,
     3, 265, 217, 5, 235, 254, 427, 164, 456, 155, 197, 395, 467, 378, 30, 226, 399, 440, 81, 134,
     404, 129],
    [76, 223, 354, 263, 216, 12, 141, 217, 215, 229, 97, 121, 108, 277, 292, 436, 471, 240, 391,
     400, 337, 470, 32, 455, 244, 91, 316, 59, 281, 266, 225, 325, 234, 24, 178, 81, 434, 9, 386,
     142, 27, 309, 460, 154, 371, 38, 387, 52, 122, 248, 22, 358, 90, 427, 433, 274, 11, 53, 161,
     247, 306, 440, 294, 190, 210, 381, 98, 446, 453, 242, 273, 160, 331, 383, 25, 363, 195, 3,
     334, 459, 10, 438, 28, 441, 435, 416, 405, 347, 37, 171, 34, 404, 196, 6, 445, 268, 328, 115,
     299, 428],
    [59, 250, 223, 346, 276, 174, 456, 329, 248, 9, 277, 87, 469, 240, 75, 366, 438, 190, 404,
     460, 26, 191, 176, 459, 48, 253, 140, 260, 116, 308, 219, 84, 279, 228, 2, 61, 352, 338, 120,
     181, 12, 117, 359, 373, 1, 369, 209, 47, 106, 415, 334, 86, 158, 315, 156, 448, 133, 398,
     303, 203, 342, 74, 189, 358, 392, 95, 247, 32, 171, 399, 319, 381, 333, 374, 97, 417, 54,
     211, 332, 271, 431, 125, 244, 51, 165, 437, 25, 385, 275, 286, 45, 98, 169, 406, 264, 297,
     114, 10, 314, 430],
])

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
        folds = []
        for subset in CONALA_CV_SUBSETS:
            problems = np.arange(len(raw))[~subset]  # their test fold, as written
            rows = np.isin(problem, problems)
            folds.append((stats.tau_darr(human[rows], metric[rows], problem[rows], 0.001,
                                         inclusive=False),
                          stats.pearson(metric[rows], human[rows]),
                          stats.spearman(metric[rows], human[rows])))
        ours = tuple(float(v) for v in np.mean(folds, axis=0))
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
