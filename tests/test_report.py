"""The audit report: files, numbers traced to results.json, escaping, absent parts."""

from __future__ import annotations

import base64
import copy
import functools
import io
import json
import re
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from hybridmetric.audit import audit
from hybridmetric.combine import MetricCard, fit_card
from hybridmetric.report import write_report
from hybridmetric.report.document import (
    IN_SAMPLE_SOURCE,
    ceiling_by_level,
    dropped_text,
    headline,
)
from hybridmetric.report.markdown import escape as md_escape
from hybridmetric.report.plots import (
    MAX_LEVELS,
    literal,
    rating_groups,
    strip_plots,
    weights_plot,
)
from hybridmetric.report.tables import DASH, fmt, fmt_estimate, fmt_p, significance_matrix

#: Markup, Markdown and mathtext, a bidi override (which would show "exe.png" as "gnp.exe") and a
#: NUL: escaped, or shown as their codes.
HOSTILE = "<script>alert('x')</script>|$x_{|&amp;\u202egnp.exe\x00"
SYSTEMS = ("alpha", "beta", "gamma", "delta")


def make_frame(seed: int = 7, hostile: bool = False) -> pd.DataFrame:
    """A small scored study: 12 tasks x 4 systems, 3 of 5 raters per row, four metrics."""
    rng = np.random.default_rng(seed)
    raters = [f"r{k}" for k in range(4)] + [HOSTILE if hostile else "r4"]
    rows = []
    for task in range(12):
        for s, system in enumerate(SYSTEMS):
            quality = rng.uniform(0, 1) * 0.7 + 0.1 * s
            ratings = {raters[k]: float(np.clip(np.round(4 * quality + rng.normal(0, 0.6)), 0, 4))
                       for k in rng.choice(5, size=3, replace=False)}
            rows.append({"task_id": f"t{task}", "system": system, "ratings": ratings,
                         "rating": float(np.mean(list(ratings.values()))),
                         "score.chrf": quality + rng.normal(0, 0.2),
                         "score.edit_sim": quality + rng.normal(0, 0.3),
                         "score.pass_rate": float(rng.uniform() < quality)})
    frame = pd.DataFrame(rows)
    frame["score.hybrid"] = 0.6 * frame["score.chrf"] + 0.4 * frame["score.edit_sim"]
    if hostile:
        frame[f"score.{HOSTILE}"] = frame["score.chrf"] * 0.5 + frame["score.pass_rate"]
    return frame


@functools.cache
def _case(seed: int, hostile: bool) -> tuple[dict[str, Any], pd.DataFrame, dict[str, Any]]:
    frame = make_frame(seed, hostile)
    results = audit(frame, seed=1, n_resamples=200, n_permutations=200)
    card = fit_card(frame, features=["chrf", "edit_sim"], seed=3, folds=3, repeats=2, n_boot=50,
                    scorer_signatures={"chrf": "chrf|v1", "edit_sim": "edit|v1"},
                    calibration="isotonic", scale=(0, 4)).data
    return results, frame, card


def make_case(seed: int = 7, hostile: bool = False) -> tuple[dict[str, Any], pd.DataFrame,
                                                              dict[str, Any]]:
    """The study, the real audit's results on it (few resamples) and a real metric card."""
    return copy.deepcopy(_case(seed, hostile))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[dict[str, Path], dict[str, Any], dict[str, Any]]:
    results, frame, card = make_case()
    return write_report(results, frame, tmp_path_factory.mktemp("report"), card=card), results, card


def td(estimate: dict[str, Any]) -> str:
    """The HTML cell of an estimate: the value, then its CI in an unbreakable span."""
    value, ci = fmt_estimate(estimate).split(" ", 1) if estimate.get("ci") else (
        fmt_estimate(estimate), "")
    return f'<td>{value} <span class="ci">{ci}</span></td>' if ci else f"<td>{value}</td>"


def table_body_numbers(markdown: str) -> list[str]:
    """Every standalone number in the body rows of the Markdown tables (headers left out)."""
    lines = markdown.splitlines()
    bodies = [line for i, line in enumerate(lines) if line.startswith("| ")
              and not (i + 1 < len(lines) and lines[i + 1].startswith("|---"))]
    number = r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-\d+)?(?!\w)"
    return [n for line in bodies for n in re.findall(number, line)]


def formatted_numbers(node: Any) -> set[str]:
    """Every number in a JSON tree, formatted every way the report formats numbers."""
    found: set[str] = set()
    if isinstance(node, dict):
        for value in node.values():
            found |= formatted_numbers(value)
    elif isinstance(node, list):
        for value in node:
            found |= formatted_numbers(value)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        found |= {fmt(node), fmt_p(node), fmt_p(node, 0.05), str(node)}
    elif isinstance(node, str):  # numbers inside text, e.g. a year in a method's description
        found |= set(re.findall(r"\d+(?:\.\d+)?", node))
    return found


def test_writes_three_files_and_results_json_is_the_input(written) -> None:
    paths, results, card = written
    assert sorted(paths) == ["html", "json", "markdown"]
    assert {p.name for p in paths.values()} == {"report.html", "report.md", "results.json"}
    assert json.loads(paths["json"].read_text()) == {**results, "card": card}
    assert paths["json"].read_text().startswith('{\n  "signature"')  # pretty-printed


def test_every_table_number_comes_from_results_json(written) -> None:
    paths, _, _ = written
    known = formatted_numbers(json.loads(paths["json"].read_text()))
    numbers = table_body_numbers(paths["markdown"].read_text())
    assert len(numbers) > 150
    stray = {n.lstrip("-") for n in numbers} - {k.lstrip("-") for k in known}
    assert not stray, f"numbers in report.md not in results.json: {sorted(stray)[:10]}"


def test_agreement_cells_in_html_and_markdown(written) -> None:
    paths, results, _ = written
    page, text = paths["html"].read_text(), paths["markdown"].read_text()
    for level in results["agreement"].values():
        for values in level.values():
            for estimate in values.values():
                cell = fmt_estimate(estimate)
                assert td(estimate) in page
                assert f"| {cell.replace('[', chr(92) + '[').replace(']', chr(92) + ']')} " in text
    hybrid = results["agreement"]["item"]["score.hybrid"]
    row = " | ".join(md_escape(fmt_estimate(hybrid[s])) for s in hybrid)
    assert f"| score.hybrid | {row} |" in text  # one row, statistics in the header's order
    header = "| metric | " + " | ".join(md_escape(s.replace("_", " ")) for s in hybrid) + " |"
    assert header in text


def test_html_is_self_contained_with_decodable_images(written) -> None:
    page = written[0]["html"].read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"https?://", page)
    targets = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert all(t.startswith(("data:", "#")) for t in targets), targets
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4  # forest, strips, weights, calibration
    for data in images:
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        assert image.format == "PNG" and min(image.size) > 100
        assert np.asarray(image.convert("L")).std() > 5  # something is drawn


def test_ceiling_is_prominent_and_signatures_at_the_bottom(written) -> None:
    paths, results, card = written
    page = paths["html"].read_text()
    assert '<section id="ceiling" class="prominent">' in page
    assert page.index('id="ceiling"') < page.index('id="agreement"')
    loo = results["ceiling"]["leave_one_rater_out"]
    assert td(loo["item"]["pearson"]) in page
    assert f"<td>{fmt(results['ceiling']['krippendorff_alpha']['ordinal'])}</td>" in page
    best = max(results["agreement"]["item"].items(), key=lambda kv: kv[1]["pearson"]["value"])
    lead = page[page.index('<p class="headline">'):page.index('<section')]
    estimate = fmt_estimate(best[1]["pearson"])
    assert f"Item level, pearson: best metric {best[0]}, {estimate}, " in lead
    ceiling = " (one rater against the others: a conservative ceiling)"
    perfect = fmt(results["ceiling"]["mean_rating"]["perfect_metric_pearson"])
    assert (f"human ceiling {fmt_estimate(loo['item']['pearson'])}{ceiling}; a metric that "
            f"matched the raters exactly would reach about {perfect} (the mean rating is noisy "
            "too).") in lead
    ceiling += "."
    assert (escape(f"would correlate with them at about {perfect} (item-level Pearson")
            in page[page.index('id="ceiling"'):page.index('id="agreement"')])
    assert f"human ceiling {fmt_estimate(loo['within_task']['tau_darr'])}{ceiling}" in lead
    footer = page[page.index("<footer>"):]
    assert escape(results["signature"]) in footer
    code = f'<code class="signature">{escape(card["signature"])}</code>'
    assert f"<p>Card signature:</p>{code}" in page
    assert paths["markdown"].read_text().rstrip().endswith(f"```\n{results['signature']}\n```")


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    results, frame, card = make_case(hostile=True)
    paths = write_report(results, frame, tmp_path, card=card)
    page = paths["html"].read_text()
    assert "<script" not in page
    hostile = ("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;|$x_{|&amp;amp;"
               "\\u202egnp.exe\\u0000")
    assert f"<td>score.{hostile}</td>" in page  # a metric
    assert f"<td>{hostile}</td>" in page  # a rater
    text = paths["markdown"].read_text()
    assert md_escape(HOSTILE) in text and "gnp.exe\\\\u0000" in md_escape(HOSTILE)
    for written in (page, text):  # (nor in the signatures: see test_signature.py)
        assert "\u202e" not in written and "\x00" not in written
    lines = text.splitlines()
    for i, line in enumerate(lines):  # every row has its table's column count; no pipe leaks
        if line.startswith("|---"):
            width = len(re.findall(r"(?<!\\)\|", lines[i - 1]))
            j = i + 1
            while j < len(lines) and lines[j].startswith("| "):
                assert len(re.findall(r"(?<!\\)\|", lines[j])) == width, lines[j]
                j += 1


def test_markdown_escape() -> None:
    assert md_escape("a|b_c<d>*e`[f]$") == r"a\|b\_c\<d\>\*e\`\[f\]\$"
    assert md_escape("two\nlines") == "two lines"
    assert md_escape("ab\u202ecd\u200b") == r"ab\\u202ecd\\u200b"  # (the backslash escaped)
    assert literal("$a\u2066b\tc\nd") == r"\$a\u2066b" + "\tc\nd"


def test_number_formats() -> None:
    assert fmt(None) == "—" and fmt(float("nan")) == "—" and fmt(12) == "12"
    assert fmt(0.41249) == "0.412" and fmt(-0.0005) == "-0.001"
    assert fmt_p(1 / 10001) == "1.0e-04" and fmt_p(0.03125) == "0.031" and fmt_p(None) == "—"
    # never shown on the other side of the level it is judged at (500/10001: not "0.050")
    assert fmt_p(500 / 10001, 0.05) == "0.049995" and fmt_p(500 / 10001) == "0.050"
    assert fmt_p(0.0499, 0.05) == "0.0499" and fmt_p(0.0501, 0.05) == "0.050"
    assert fmt_estimate({"value": 0.5, "ci": [0.25, 0.75]}) == "0.500 [0.250, 0.750]"
    assert fmt_estimate({"value": 0.5, "ci": None}) == "0.500"


def test_significance_matrix_styles() -> None:
    def row(b: str, level: str, delta: float, p: float | None) -> dict[str, Any]:
        return {"a": "h", "b": b, "level": level, "statistic": "pearson", "delta": delta,
                "p_holm": p}

    rows = [row("x", "item", 0.1, 0.01), row("y", "item", -0.2, 0.0004),
            row("z", "item", 0.3, 0.2), row("x", "system", 0.0, None)]
    table = significance_matrix(rows, 0.05)
    assert table.title == "Significance: h against each metric"
    assert table.columns == ["metric b", "item: pearson", "system: pearson"]
    assert [[(c.text, c.style) for c in line] for line in table.rows] == [
        [("x", ""), ("0.100 (0.010)", "good"), ("0.000 (—)", "muted")],
        [("y", ""), ("-0.200 (4.0e-04)", "muted"), ("·", "muted")],  # (one-sided: a > b)
        [("z", ""), ("0.300 (0.200)", "muted"), ("·", "muted")],
    ]
    rows.append({**row("y", "item", 0.05, 0.04), "a": "x"})
    table = significance_matrix(rows, 0.05)
    assert table.columns[0] == "a − b"
    assert [c.text for c in table.rows[-1]] == ["x − y", "0.050 (0.040)", "·"]


def test_no_card_and_no_ratings_say_so(tmp_path: Path) -> None:
    frame = make_frame().drop(columns="ratings")
    results = audit(frame, seed=1, n_resamples=50, n_permutations=50)
    paths = write_report(results, frame, tmp_path)
    page, text = paths["html"].read_text(), paths["markdown"].read_text()
    for body in (page, text):
        assert "No metric card was given" in body
        assert "The human ceiling could not be computed: the table has no per" in body
        assert "Human ceiling: not computed (the table has no per-rater" in body
        assert "Weights" not in body and "Calibration" not in body
    assert "card" not in json.loads(paths["json"].read_text())
    assert page.count("data:image/png") == 2  # forest and strips only
    assert "Dashed lines" not in page


def test_the_headline_gives_the_ceiling_s_own_reason(tmp_path: Path) -> None:
    """Raters who graded another column than the target: the summary says so, as the ceiling's
    section does (not that the table has no per-rater ratings)."""
    frame = make_frame()
    frame["value"] = frame["rating"]
    results = audit(frame, target="value", seed=1, n_resamples=50, n_permutations=50)
    text = write_report(results, frame, tmp_path)["markdown"].read_text()
    assert ("Human ceiling: not computed (the raters' grades ('ratings') grade 'rating', not the "
            "target 'value')." in text)
    assert "no per-rater ratings" not in text


def test_the_headline_says_when_its_best_metric_is_an_in_sample_hybrid() -> None:
    """A card's hybrid applied to the rows it may have been fitted on: where it is the best
    metric, the headline says so (run's out-of-fold hybrid needs no such word)."""
    results, _, _ = make_case()
    for level in results["agreement"].values():  # the hybrid at the top of every level
        for estimate in level["score.hybrid"].values():
            if isinstance(estimate, dict) and estimate.get("value") is not None:
                estimate["value"] = 0.999
    applied = f"the card c.json applied to these rows ({IN_SAMPLE_SOURCE}); its signature: x"
    said = headline({**results, "hybrid_source": applied})
    assert said.count(f"best metric score.hybrid (a metric card's, {IN_SAMPLE_SOURCE})") >= 2
    held_out = headline({**results, "hybrid_source": "out-of-fold predictions"})
    assert "best metric score.hybrid, " in held_out and IN_SAMPLE_SOURCE not in held_out


def test_ceiling_none_is_explained(tmp_path: Path) -> None:
    results, frame, _ = make_case()
    results["ceiling"] = None
    page = write_report(results, frame, tmp_path)["html"].read_text()
    assert "The human ceiling could not be computed: the results hold no inter-rater" in page


def test_card_inside_results_is_used_and_conflicts_fail(tmp_path: Path) -> None:
    results, frame, card = make_case()
    paths = write_report({**results, "card": card}, frame, tmp_path)
    weight = card["weights"]["score.chrf"]
    assert td(weight) in paths["html"].read_text()
    with pytest.raises(ValueError, match="different metric card"):
        write_report({**results, "card": card}, frame, tmp_path, card={**card, "intercept": 0.0})
    with pytest.raises(TypeError, match=r"MetricCard.data"):
        write_report(results, frame, tmp_path, card=MetricCard(card))


@pytest.mark.parametrize(("path", "value", "message"), [
    (("agreement", "item", "score.chrf", "pearson", "value"), float("nan"), "is nan"),
    (("n_rows",), np.int64(3), "is a int64"),
    (("settings", "seed"), float("inf"), "is inf"),
])
def test_non_json_results_fail_naming_the_place(tmp_path: Path, path, value, message) -> None:
    results, frame, _ = make_case()
    node = results
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    where = "results" + "".join(f"[{key!r}]" for key in path)
    with pytest.raises(ValueError, match=re.escape(where) + " " + message):
        write_report(results, frame, tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_metric_without_column_and_missing_target_fail(tmp_path: Path) -> None:
    results, frame, _ = make_case()
    with pytest.raises(ValueError, match="metric 'score.chrf' of the results is not a column"):
        write_report(results, frame.drop(columns="score.chrf"), tmp_path)
    with pytest.raises(ValueError, match="target 'rating' of the results is not a column"):
        write_report(results, frame.drop(columns="rating"), tmp_path)
    with pytest.raises(ValueError, match="no 'signature'"):
        write_report({k: v for k, v in results.items() if k != "signature"}, frame, tmp_path)


def test_ceiling_by_level() -> None:
    results, _, _ = make_case()
    assert ceiling_by_level(results) == results["ceiling"]["leave_one_rater_out"]
    assert ceiling_by_level({**results, "ceiling": {"reason": "no raters"}}) == {}
    assert ceiling_by_level({**results, "ceiling": None}) == {}


def test_strip_plot_survives_an_all_missing_metric() -> None:
    _, frame, _ = make_case()
    frame["score.none"] = np.nan
    png = strip_plots(frame, "rating", ["score.none", "score.chrf"])
    assert Image.open(io.BytesIO(png)).format == "PNG"


def test_a_weight_outside_its_own_interval_is_drawn() -> None:
    """A percentile bootstrap interval need not hold its estimate (a few resamples, a skewed
    feature): the plot draws it as it is."""
    weights = {"score.edit_sim": {"value": 0.071, "ci": [0.0, 0.059]},
               "score.chrf": {"value": 0.2, "ci": [0.1, 0.3]}}
    image = Image.open(io.BytesIO(weights_plot(weights, "95% CI")))
    assert image.size[0] > 100


def test_rating_groups_by_value_then_by_bin() -> None:
    group, positions = rating_groups(np.array([0.0, 1.0, 4.0, 1.0]))
    assert group.tolist() == [0, 1, 2, 1] and positions.tolist() == [0.0, 1.0, 4.0]
    fine = np.arange(0, 4.01, 0.25)  # 17 values > MAX_LEVELS: equal-width bins of width 1/3
    assert MAX_LEVELS == 12
    group, positions = rating_groups(fine)
    assert group[[0, 1, 2, 5, -1]].tolist() == [0, 0, 1, 3, 11]  # 0.25 < 1/3 <= 0.5; 4.0 last
    np.testing.assert_allclose(positions[[0, -1]], [1 / 6, 4 - 1 / 6])


def test_short_resamples_and_exact_settings_are_reported(tmp_path: Path) -> None:
    results, frame, _ = make_case()
    results["agreement"]["system"]["score.pass_rate"]["spearman"]["n_valid"] = 187
    results["settings"]["tie_threshold"] = 0.0001
    text = write_report(results, frame, tmp_path)["markdown"].read_text()
    assert ("CIs from fewer resamples, where the statistic was undefined in the others: "
            "score.pass\\_rate spearman (187 of 200).") in text
    assert text.count("CIs from fewer resamples") == 1
    assert "No CI" not in text
    # none computed (a table too large for the Kendall taus' CIs): not "undefined in the others"
    results["agreement"]["system"]["score.pass_rate"]["spearman"].update(n_valid=0, ci=None)
    text = write_report(results, frame, tmp_path)["markdown"].read_text()
    assert "CIs from fewer resamples" not in text
    assert ("No CI (not computed, or undefined in every resample; see the notes on what was "
            "left out): score.pass\\_rate spearman.") in text
    assert "| tie threshold | 0.0001 |" in text
    assert "Cells: estimate \\[95% bootstrap CI over tasks\\]." in text


def test_same_input_gives_byte_identical_files(written, tmp_path: Path) -> None:
    paths, results, card = written
    _, frame, _ = make_case()
    again = write_report(results, frame, tmp_path, card=card)
    for kind, path in paths.items():
        assert again[kind].read_bytes() == path.read_bytes(), kind


def test_pass_vs_fail_and_by_system_sections(tmp_path: Path) -> None:
    frame = make_frame().assign(**{"score.pass": lambda f: f["score.pass_rate"]})
    frame.loc[[0, 5], "score.pass"] = np.nan  # rows without tests
    results = audit(frame, metrics=["score.chrf", "score.hybrid"], seed=1, n_resamples=100,
                    n_permutations=50, scale=(0, 4))
    paths = write_report(results, frame, tmp_path)
    page, text = paths["html"].read_text(), paths["markdown"].read_text()
    value = results["pass_value"]
    for body in (page, text):
        assert "Passing vs failing code" in body and "By system" in body
        assert "No comparison of passing and failing code" not in body
    assert text.index("## Passing vs failing code") < text.index("## By system")
    assert (f"| fails its tests | {value['fail']['n']} | {value['fail']['n_tasks']} | "
            f"{md_escape(fmt_estimate(value['fail']['mean']))} | "
            f"{md_escape(fmt_estimate(value['fail']['useful_share']))} |") in text
    delta = md_escape(fmt_estimate(value["difference"]["mean"]))
    assert f"| difference (pass − fail) | — | — | {delta} |" in text
    grade = value["pass"]["distribution"][4]
    fail4 = value["fail"]["distribution"][4]
    assert (f"| 4 | {grade['n']} | {md_escape(fmt_estimate(grade['share']))} | {fail4['n']} | "
            f"{md_escape(fmt_estimate(fail4['share']))} |") in text
    assert "Audited rows without tests (n/a): 2, left out." in text
    gamma = results["by_system"]["gamma"]
    assert (f"| gamma | 12 | 12 | {md_escape(fmt_estimate(gamma['mean']))} | "
            f"{fmt(gamma['metrics']['score.chrf'])} | {fmt(gamma['metrics']['score.hybrid'])} |"
            ) in text
    assert page.count("data:image/png") == 3  # forest, grade bars, strips
    known = formatted_numbers(json.loads(paths["json"].read_text()))
    stray = {n.lstrip("-") for n in table_body_numbers(text)} - {k.lstrip("-") for k in known}
    assert not stray, f"numbers in report.md not in results.json: {sorted(stray)[:10]}"


def test_pass_vs_fail_and_by_system_absent(tmp_path: Path) -> None:
    frame = make_frame().drop(columns=["system", "ratings"])
    results = audit(frame, seed=1, n_resamples=50, n_permutations=50)
    text = write_report(results, frame, tmp_path)["markdown"].read_text()
    assert "Passing vs failing code" not in text and "## By system" not in text
    assert "No comparison of passing and failing code: the table has no" in text


def test_forest_plot_draws_estimates_outside_or_at_the_edge_of_their_interval() -> None:
    from hybridmetric.report.plots import forest_plot

    agreement = {"item": {"score.a": {"pearson": {"value": 0.9999999999999999, "ci": [1.0, 1.0]},
                                      "kendall": {"value": 0.1, "ci": [0.15, 0.4]}}}}
    assert forest_plot(agreement, ["pearson", "kendall"]).startswith(b"\x89PNG")


def test_grade_bars_draw_a_share_outside_its_own_interval() -> None:
    """A few resamples can give a share a percentile interval that leaves it out (it once
    stopped the report: matplotlib refuses negative error bars)."""
    from hybridmetric.report.plots import grade_bars

    share = {"value": 0.5, "ci": [0.55, 0.8], "n_valid": 3}
    pass_value = {"grades": [0, 1], "grading": "rounded",
                  "pass": {"n": 4, "distribution": [{"grade": 0, "share": share},
                                                    {"grade": 1, "share": share}]},
                  "fail": {"n": 4, "distribution": [{"grade": 1, "share": share}]}}
    assert grade_bars(pass_value, "rating").startswith(b"\x89PNG")


def _scaled(node: Any, other: Any) -> None:
    """``node`` equals ``other`` wherever it holds a number (to 1e-9), and in its keys."""
    if isinstance(node, dict):
        assert node.keys() == other.keys()
        for key in node:
            _scaled(node[key], other[key])
    elif isinstance(node, list):
        assert len(node) == len(other)
        for a, b in zip(node, other, strict=True):
            _scaled(a, b)
    elif isinstance(node, float):
        assert node == pytest.approx(other, rel=1e-9, abs=1e-12, nan_ok=True)


def test_a_tiny_rating_scale_gives_the_same_audit_and_shows_its_digits(tmp_path) -> None:
    """Ratings of 0 to 4e-7 are ratings of 0 to 4 times 1e-7: every statistic of the audit is
    the same, and the report shows the means, weights and calibration of such a scale to 10
    decimals, as finely for its size as 3 show 0 to 1 (at 3 decimals every one was 0.000)."""
    frame = make_frame()
    tiny = frame.assign(rating=frame["rating"] * 1e-7,
                        ratings=[{r: g * 1e-7 for r, g in row.items()} for row in frame["ratings"]])
    plain = audit(frame, seed=1, n_resamples=200, n_permutations=200, scale=(0, 4))
    small = audit(tiny, seed=1, n_resamples=200, n_permutations=200, scale=(0, 4e-7))
    for key in ("agreement", "comparisons", "ceiling"):
        _scaled(small[key], plain[key])
    for system, values in small["by_system"].items():
        assert values["mean"]["value"] == pytest.approx(
            plain["by_system"][system]["mean"]["value"] * 1e-7, rel=1e-11)
    card = fit_card(tiny, features=["chrf", "edit_sim"], seed=3, folds=3, repeats=2, n_boot=50,
                    scorer_signatures={"chrf": "chrf|v1", "edit_sim": "edit|v1"},
                    calibration="isotonic", scale=(0, 4e-7)).data
    text = write_report(small, tiny, tmp_path, card=card)["markdown"].read_text()
    shown = [fmt_estimate(v["mean"], 10) for v in small["by_system"].values()]
    shown += [fmt_estimate(w, 10) for w in card["weights"].values()]
    shown += [fmt(row[k], 10) for row in card["calibration"]["table"]
              for k in ("predicted", "observed")]
    assert all(f" {md_escape(cell)} |" in text for cell in shown)
    assert sum(float(cell.split()[0]) != 0 for cell in shown) >= len(shown) - 2
    summary = MetricCard(card).summary()  # (what fit prints)
    assert all(f"{w['value']:+.10f} [{w['ci'][0]:+.10f}," in summary
               for w in card["weights"].values())


def test_the_rows_left_out_are_told_by_the_column_they_lacked() -> None:
    """"120 rows left out" alone sent a reader to the study's files for why (the tests of 24
    tasks could not judge, and those tasks left every metric's audit)."""
    results = {"n_dropped_rows": 120, "dropped": {"by_column": {"score.pass_rate": 120},
                                                  "n_tasks": 24}}
    assert dropped_text(results) == "120 (score.pass_rate missing: 120; 24 task(s) left out whole)"
    assert dropped_text({"n_dropped_rows": 3}) == "3"  # (results of an audit before this)


def test_the_headline_says_whether_the_best_metric_s_lead_holds() -> None:
    """"best metric" by its estimate alone read as a clear win where the next metric was not
    significantly behind: the headline gives the lead, its CI and the test's p (Holm)."""
    results, _, _ = make_case()
    item = results["agreement"]["item"]
    ranked = sorted(item, key=lambda m: -item[m]["pearson"]["value"])
    best, runner = ranked[0], ranked[1]
    for row in results["comparisons"]:
        if (row["level"], row["statistic"]) == ("item", "pearson"):
            row.update(a=best, b=runner, delta=0.021, ci=[-0.003, 0.045], p_holm=0.168)
            break
    said = headline(results)
    assert (f"best metric {best}, {fmt_estimate(item[best]['pearson'])}, above {runner} "
            f"({fmt(item[runner]['pearson']['value'])}) by 0.021 [-0.003, 0.045], p 0.168 "
            "(permutation, Holm): not significant") in said
    for row in results["comparisons"]:  # the runner-up the focus: its test is not of the lead,
        if (row["level"], row["statistic"]) == ("item", "pearson"):  # whose CI it gives reversed
            row.update(a=runner, b=best, delta=-0.021, ci=[-0.045, 0.0002])
    assert (f"above {runner} ({fmt(item[runner]['pearson']['value'])}) by 0.021 [-0.0002, "
            f"0.045] (the audit tests {runner} against the others, one-sided, not this lead)") \
        in headline(results)
    results["comparisons"] = []
    assert f"then {runner} ({fmt(item[runner]['pearson']['value'])}; no test compares the two)" \
        in headline(results)


def test_the_hybrid_s_held_out_comparison_is_a_row_a_statistic(tmp_path: Path) -> None:
    """By each statistic, with its test; a card of before (Kendall's alone, untested, as its
    parsed JSON) keeps its row."""
    results, frame, card = make_case()
    text = write_report(results, frame, tmp_path / "new", card=card)["markdown"].read_text()
    table = text.split("Hybrid against the best single feature (held out)")[1]
    for name, c in card["cv"]["comparisons"].items():
        assert (f"| {name} | {c['best_feature']} | {fmt(c['best_feature_value'])} | "
                f"{fmt(c['hybrid_value'])} | {c['gain']:+.3f} ({fmt(c['gain_sd'])}) | "
                f"{c['wins']} of {c['n_folds']} | {fmt_p(c['p'], 0.05)}") in table
    new = card["cv"].pop("comparisons")["kendall"]
    card["cv"]["comparison"] = {"metric": "kendall", "best_feature": new["best_feature"],
                                "best_feature_kendall": new["best_feature_value"],
                                "hybrid_kendall": new["hybrid_value"], "gain": new["gain"],
                                "gain_sd": new["gain_sd"], "wins": new["wins"],
                                "n_folds": new["n_folds"], "beats_best_feature": True}
    text = write_report(results, frame, tmp_path / "old", card=card)["markdown"].read_text()
    table = text.split("Hybrid against the best single feature (held out)")[1]
    assert f"| kendall | {new['best_feature']} | {fmt(new['best_feature_value'])} |" in table
    assert "| pearson |" not in table.split("\n\n")[1]


def test_a_ci_bound_that_rounds_to_zero_shows_its_sign() -> None:
    """"[-0.000, 0.034]": whether the interval holds 0 is what the reader wants to know."""
    assert fmt_estimate({"value": 0.017, "ci": [-0.0002, 0.034]}) == "0.017 [-0.0002, 0.034]"
    # (but rounding error is 0: a difference of equal sums taken in another order)
    assert fmt_estimate({"value": 0.003, "ci": [-3e-13, 0.008]}) == "0.003 [0.000, 0.008]"
    assert fmt_estimate({"value": 3e-9, "ci": [-3e-13, 8e-9]}, 9) == (
        "0.000000003 [-0.0000000000003, 0.000000008]")  # (on a scale that small, a bound)
    assert fmt_estimate({"value": 0.017, "ci": [0.00004, 0.034]}) == "0.017 [0.00004, 0.034]"
    assert fmt_estimate({"value": 0.017, "ci": [0.0, 0.034]}) == "0.017 [0.000, 0.034]"
    assert fmt_estimate({"value": 0.0001, "ci": [-0.0012, 0.0]}) == "0.000 [-0.001, 0.000]"


def test_the_headline_says_when_the_best_metrics_tie() -> None:
    """Two metrics of one value: "best metric" named one of them, then said the audit tested
    the other "not this lead", where there was no lead."""
    results, _, _ = make_case()
    item = results["agreement"]["item"]
    ranked = sorted(item, key=lambda m: -item[m]["pearson"]["value"])
    item[ranked[1]]["pearson"]["value"] = item[ranked[0]]["pearson"]["value"]
    said = headline(results)
    tied = ", ".join(m for m in item if m in ranked[:2])  # (in the results' order)
    assert (f"Item level, pearson: best metrics, tied, {tied}, "
            f"{fmt(item[ranked[0]]['pearson']['value'])}; human ceiling") in said
    assert "not this lead" not in said.split(". ")[0]


def test_the_terms_used_are_explained_and_a_chosen_focus_is_flagged(tmp_path: Path) -> None:
    """tau darr, tie-calibrated accuracy, clip: words a reader had to find in the code. Each
    term the report uses is explained (a card's only with a card), and a focus that the audit
    chose as the best on the same rows is said to make its one-sided tests optimistic."""
    results, frame, card = make_case()
    with_card = write_report(results, frame, tmp_path / "a", card=card)["markdown"].read_text()
    for term in ("tau darr: CodeBERTScore's statistic", "pairwise accuracy tc: the same with "
                 "tie calibration", "weight per SD: ", "Calibration (clip), (isotonic): "):
        assert md_escape(term) in with_card, term
    chosen = {**results, "focus": "score.chrf", "focus_rule": "best item pearson"}
    text = write_report(chosen, frame, tmp_path / "b")["markdown"].read_text()
    assert md_escape("weight per SD: ") not in text
    assert "its one-sided tests against the others are optimistic" in text
    assert "are optimistic" not in with_card  # (the hybrid, named by the card's rule)


def test_raters_are_listed_in_their_numbers_order() -> None:
    """grader1, grader10, grader11, ... grader2 read as a sorting bug."""
    from hybridmetric.report.tables import ceiling_tables
    ceiling = {"per_rater": {f"grader{k}": {"pearson": 0.5} for k in (1, 10, 2, 11, 3)}}
    table = ceiling_tables(ceiling)[-1]
    assert [row[0].text for row in table.rows] == [f"grader{k}" for k in (1, 2, 3, 10, 11)]
    assert table.note == ""


def test_a_crowd_of_raters_lists_those_with_the_most_rows_and_says_what_a_dash_means() -> None:
    """A crowd study's 200 raters: the 40 with the most shared rows (ties by name), in name
    order, a note that says so; a rater whose correlation is undefined shows a dash, which the
    note explains."""
    from hybridmetric.report.tables import MAX_RATERS_SHOWN, ceiling_tables
    per_rater = {f"r{k}": {"n": 1000 - k if k % 2 else 3, "pearson": 0.5, "spearman": 0.4}
                 for k in range(200)}
    per_rater["r7"]["pearson"] = None
    table = ceiling_tables({"per_rater": per_rater})[-1]
    kept = sorted((k for k in range(200) if k % 2), key=lambda k: 1000 - k, reverse=True)
    assert [row[0].text for row in table.rows] == [f"r{k}" for k in sorted(kept[:40])]
    assert MAX_RATERS_SHOWN == 40
    assert "The 40 raters with the most shared rows of 200" in table.note
    assert "not defined" in table.note and table.rows[3][2].text == DASH  # (r7, pearson)
