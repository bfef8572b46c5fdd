"""The report as a list of sections, independent of the output format.

Every number in a section comes from the results dict or the metric card; the strip plots alone
draw the scored rows themselves. A part that is absent (no card, no per-rater ratings, no
comparisons) gives a section that says so, never a silently missing one; the by-system and
pass/fail sections appear when the results hold them (the overview says when pass/fail is absent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hybridmetric.combine import cv_comparisons
from hybridmetric.report import plots
from hybridmetric.report.tables import (
    Table,
    agreement_tables,
    by_system_table,
    calibration_table,
    ceiling_tables,
    ci_name,
    comparison_table,
    cv_comparison_table,
    cv_table,
    fmt,
    fmt_estimate,
    fmt_p,
    is_estimate,
    key_value_table,
    label,
    pass_value_tables,
    scale_decimals,
    significance_matrix,
    statistics_of,
    weights_table,
)
from hybridmetric.schema import HYBRID_COLUMN, where_text

ALPHA = 0.05  # significance level for highlighting, unless the results' settings give one
#: Correlations drawn in the forest plot (pairwise accuracies, on another scale, stay in tables).
FOREST_STATISTICS = ("pearson", "spearman", "kendall_tau_b", "kendall_tau_c", "tau_darr")
LEVEL_NAMES = {"item": "Item level", "within_task": "Within task", "system": "System level"}
#: What a ``hybrid_source`` says of a ``score.hybrid`` that a metric card gave the audited rows:
#: the headline then says so beside it, where it is the best metric.
IN_SAMPLE_SOURCE = "in-sample where it was fitted on these rows"


@dataclass(frozen=True)
class Plot:
    """A figure: PNG bytes, alternative text and a caption."""

    png: bytes
    alt: str
    caption: str


@dataclass(frozen=True)
class Code:
    """A labelled verbatim string, such as a signature."""

    label: str
    text: str


Block = str | Table | Plot | Code  # a paragraph of plain text, a table, a figure or a string


@dataclass
class Section:
    anchor: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    prominent: bool = False


def check_columns(frame: pd.DataFrame, results: Mapping[str, Any]) -> None:
    """Fail unless ``frame`` has the results' target and metric columns."""
    for kind, name in [("target", results["target"])] + [("metric", m) for m in
                                                         results.get("metrics", [])]:
        if name not in frame.columns:
            raise ValueError(f"{kind} '{name}' of the results is not a column of the scored table "
                             f"(columns: {list(frame.columns)}); pass the table the audit ran on")


def dropped_text(results: Mapping[str, Any]) -> str:
    """``120 (score.pass_rate missing: 120; 24 tasks left out whole)``: the rows the audit left
    out for a missing value, by the column each lacked."""
    text = str(results["n_dropped_rows"])
    dropped = results.get("dropped") or {}
    parts = [f"{column} missing: {n}" for column, n in (dropped.get("by_column") or {}).items()]
    if dropped.get("n_tasks"):
        parts.append(f"{dropped['n_tasks']} task(s) left out whole")
    return f"{text} ({'; '.join(parts)})" if parts else text


def ceiling_by_level(results: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The leave-one-rater-out ceiling, ``{level: {statistic: estimate}}`` (empty without one)."""
    ceiling = results.get("ceiling")
    if not isinstance(ceiling, Mapping):
        return {}
    return dict(ceiling.get("leave_one_rater_out") or {})


def _overview(results: Mapping[str, Any]) -> Section:
    facts = {
        "target": results.get("target"), "rows": results.get("n_rows"),
        "tasks": results.get("n_tasks"), "systems": results.get("n_systems"),
        "metrics": ", ".join(results.get("metrics", [])),
    }
    if results.get("where"):
        facts["rows audited (--where)"] = (f"those where {where_text(results['where'])}, of "
                                           f"the table's {results.get('n_table_rows')}")
    if results.get("n_dropped_rows"):
        facts["rows left out (a metric or the target missing)"] = dropped_text(results)
    if results.get("hybrid_source"):
        facts["score.hybrid"] = results["hybrid_source"]
    if "focus" in results:
        facts["compared against the others"] = f"{results['focus']} ({results.get('focus_rule')})"
    section = Section("overview", "Overview", [key_value_table("Data", facts)])
    for reason in results.get("skipped") or []:
        section.blocks.append(f"Left out: {str(reason).rstrip('.')}.")
    for note in results.get("notes") or []:
        section.blocks.append(f"Note: {str(note).rstrip('.')}.")
    if "pass_value" not in results:
        section.blocks.append("No comparison of passing and failing code: the table has no "
                              "`score.pass` column (unit-test results).")
    return section


def _by_system(results: Mapping[str, Any]) -> Section:
    section = Section("by-system", "By system")
    section.blocks.append(by_system_table(results))
    return section


def _pass_value(results: Mapping[str, Any]) -> Section:
    value = results["pass_value"]
    target = str(results["target"])
    section = Section("pass-value", "Passing vs failing code")
    section.blocks.append(
        "Do programmers value code that fails its unit tests? Dibia et al. (2022, arXiv "
        "2210.16494) found that they do. Below: the ratings of rows whose code passes its tests "
        "against rows whose code fails them, and the share rated useful."
    )
    section.blocks.append(Plot(
        plots.grade_bars(value, target),
        f"Grouped bar chart of the {target} grade distribution for passing and failing code",
        f"Share of passing (green) and failing (red) rows at each grade, with "
        f"{ci_name(results)}s over tasks.",
    ))
    section.blocks.extend(pass_value_tables(results))
    return section


def _ceiling(results: Mapping[str, Any]) -> Section:
    section = Section("ceiling", "Human ceiling", prominent=True)
    ceiling = results.get("ceiling")
    if not isinstance(ceiling, Mapping) or "reason" in ceiling or not ceiling:
        reason = ceiling.get("reason") if isinstance(ceiling, Mapping) else None
        section.blocks.append(
            "The human ceiling could not be computed: "
            + (str(reason) if reason else "the results hold no inter-rater agreement (the table "
               "needs a per-rater `ratings` column).")
        )
        return section
    section.blocks.append(
        "How well raters agree with each other is the yardstick for a metric: the "
        "leave-one-rater-out correlation (each rater against the mean of the other raters, "
        "pooled) says how well one human predicts the others' consensus, so a metric that "
        "reaches it agrees with the raters about as well as another rater would. Krippendorff's "
        "alpha (Krippendorff 2011; 1 = perfect agreement, 0 = chance) measures the raters' "
        "overall reliability. It is a conservative ceiling: one rater's whole-number grades tie "
        "far more often than a mean of raters or a metric does, which lowers rank statistics "
        "such as tau darr most, so a metric can exceed it there without beating the raters. "
        "It takes raters to be spread over the systems: where each system's rows are graded by "
        "raters of its own, a rater and the others on a row share those raters' leanings, "
        "which raise the ceiling, even above what a perfect metric reaches."
    )
    mean = ceiling.get("mean_rating")
    if isinstance(mean, Mapping) and mean.get("reliability") is not None:
        how = ("fitting each rater's overall leniency apart (a two-way model: grade = row + "
               "rater + error; where every rater graded every row, the intraclass correlation "
               "ICC(C,k) of McGraw & Wong 1996), the noise of a row's mean is its error over "
               f"its {fmt(mean['raters_per_row'], 2)} raters (harmonic mean) and the mean "
               "leniency of the raters it happens to have, which" if _leniency_fitted(mean) else
               "the raters' design does not tell their leniency from the rows, so from "
               "Krippendorff's interval alpha (the reliability of one grade) and the "
               f"{fmt(mean['raters_per_row'], 2)} raters a row has (harmonic mean), the "
               "Spearman-Brown formula, which counts a rater's overall leniency as error (it "
               "can be far too low where rows share raters who differ in leniency),")
        section.blocks.append(
            f"The mean rating is itself a noisy measure of what the raters judge: {how} puts "
            f"the reliability of the rows' mean ratings at {fmt(mean['reliability'])}. A metric "
            "that matched the raters' shared judgement exactly would correlate with them at "
            f"about {fmt(mean['perfect_metric_pearson'])} (item-level Pearson: the square root "
            "of the reliability, Spearman's attenuation), not 1. A point estimate, with no "
            "interval; it takes the raters' errors as independent, and which raters grade a "
            "row as unrelated to its quality (lenient raters given the better rows make it low)."
        )
    section.blocks.extend(ceiling_tables(ceiling))
    return section


def _perfect_metric(results: Mapping[str, Any]) -> str:
    """What the headline says of the item-level Pearson with the mean rating of a metric that
    matched the raters' shared judgement exactly (``ceiling.mean_rating``), or ""."""
    ceiling = results.get("ceiling")
    mean = ceiling.get("mean_rating") if isinstance(ceiling, Mapping) else None
    if not isinstance(mean, Mapping) or mean.get("perfect_metric_pearson") is None:
        return ""
    return (f"; a metric that matched the raters exactly would reach about "
            f"{fmt(mean['perfect_metric_pearson'])} (the mean rating is noisy too"
            + ("" if _leniency_fitted(mean) else "; an estimate that is low where rows share "
               "raters") + ")")


def _leniency_fitted(mean: Mapping[str, Any]) -> bool:
    """Whether ``ceiling.mean_rating`` is the two-way estimate (else Spearman-Brown of alpha)."""
    return str(mean.get("method", "")).startswith("two-way")


def _agreement(results: Mapping[str, Any]) -> Section:
    agreement = results.get("agreement") or {}
    section = Section("agreement", "Agreement with the human rating")
    if not agreement:
        section.blocks.append("The results hold no agreement statistics.")
        return section
    present = {s for level in agreement.values() for s in statistics_of(level)}
    shown = [s for s in FOREST_STATISTICS if s in present]
    reference = ceiling_by_level(results)
    if shown:
        section.blocks.append(Plot(
            plots.forest_plot(agreement, shown, reference),
            "Forest plot of each metric's correlation with the rating, with confidence intervals",
            f"Each metric's correlation with the rating at each level, with {ci_name(results)}s "
            "(resampling tasks); pairwise accuracies are in the tables."
            + (" Dashed lines and shaded bands: the human ceiling (leave one rater out) and its "
               "CI." if reference else ""),
        ))
    else:
        section.blocks.append("No correlation statistic to plot; see the tables.")
    section.blocks.extend(agreement_tables(results))
    if results.get("counts"):
        section.blocks.append(key_value_table("Pairs", results["counts"]))
    return section


def _significance(results: Mapping[str, Any], alpha: float) -> Section:
    comparisons = results.get("comparisons") or []
    section = Section("significance", "Is the difference real?")
    if not comparisons:
        section.blocks.append("The results hold no pairwise comparisons of metrics.")
        return section
    section.blocks.append(
        "Each comparison tests whether metric a agrees with the rating better than metric b on "
        "the same rows: the Williams test for dependent correlations (Graham & Baldwin 2014; "
        "at the item level only where each task has one row, as it takes rows as "
        "independent), the PERM-BOTH paired permutation test (Deutsch et al. 2021, arXiv "
        "2104.00054), which swaps the two metrics' scores of whole tasks, as the rows of a "
        "task share its references (at the system level a variant that swaps whole systems' "
        "means, approximate: 3-9% at 0.05 in null simulations, and with S systems never below "
        "1/2^S), and the paired bootstrap CI of the difference, with Holm's correction across "
        "the metric family."
    )
    section.blocks.append(significance_matrix(comparisons, alpha))
    section.blocks.append(comparison_table(comparisons, alpha))
    return section


def _strips(results: Mapping[str, Any], frame: pd.DataFrame) -> Section:
    section = Section("scatter", "Each metric against the rating")
    metrics = list(results.get("metrics", []))
    if not metrics:
        section.blocks.append("The results name no metrics to plot.")
        return section
    target = results["target"]
    section.blocks.append(Plot(
        plots.strip_plots(frame, target, metrics),
        f"Strip plots of each metric against {target}",
        f"Each dot is a row, jittered horizontally; the red line joins the metric's mean per "
        f"value of {target} (per equal-width {target} bin when {target} takes more than "
        f"{plots.MAX_LEVELS} values). Rows where a metric does not apply are left out and "
        "counted.",
    ))
    return section


def _hybrid(card: Mapping[str, Any] | None, alpha: float) -> Section:
    section = Section("hybrid", "The hybrid metric")
    if card is None:
        section.blocks.append("No metric card was given, so this report has no hybrid weights, "
                              "calibration or cross-validated agreement.")
        return section
    features = ", ".join(f["name"] for f in card.get("features", [])) or ", ".join(card["weights"])
    section.blocks.append(
        f"Model {card.get('model', 'unnamed')} predicting {card.get('target', 'the rating')} "
        f"from {features}, validated on held-out tasks."
    )
    details = {key: card[key] for key in ("model", "alpha", "target", "scale", "scale_source",
                                          "bootstrap", "seed") if card.get(key) is not None}
    section.blocks.append(key_value_table("Model", details, exact=True))
    fitted = {key: card[key] for key in ("intercept", "intercept_per_unit", "rater_sd",
                                         "ordinal") if key in card}
    decimals = scale_decimals(card.get("scale"))
    if fitted:
        section.blocks.append(key_value_table("Fitted constants", fitted, decimals=decimals))
    level = (card.get("bootstrap") or {}).get("level")
    ci = f"{100 * level:g}% CI" if level is not None else "CI"
    section.blocks.append(Plot(plots.weights_plot(card["weights"], ci),
                               "The hybrid's weights with confidence intervals",
                               f"The hybrid's weights per training SD of each feature, with "
                               f"{ci}s (bootstrap over tasks)."))
    section.blocks.append(weights_table(card, ci))
    calibration = card.get("calibration")
    if calibration and calibration.get("table"):
        section.blocks.append(Plot(
            plots.calibration_plot(calibration["table"], card.get("scale")),
            "Calibration plot: mean observed against mean predicted rating per bin",
            "Calibration: mean observed rating against mean prediction per bin; dashed: perfect.",
        ))
        section.blocks.append(calibration_table(calibration, decimals))
    else:
        section.blocks.append("The card holds no calibration table.")
    cv = card.get("cv")
    if cv:
        section.blocks.append(cv_table(cv))
        if cv_comparisons(cv):
            section.blocks.append(cv_comparison_table(cv, alpha))
    else:
        section.blocks.append("The card holds no cross-validation results.")
    if card.get("training"):
        section.blocks.append(key_value_table("Training data", card["training"], exact=True))
    if card.get("signature"):
        section.blocks.append(Code("Card signature", card["signature"]))
    return section


Used = Callable[[Mapping[str, Any], Mapping[str, Any] | None], bool]  # (results, card)
#: What the report's terms mean, each shown where the report uses it: (term, whether it is
#: used, its meaning).
TERMS: tuple[tuple[str, Used, str], ...] = (
    ("tau darr", lambda r, c: _statistic_used(r, "tau_darr"),
     "CodeBERTScore's statistic (Zhou et al. 2023, Table 1), the da-RR Kendall tau of Stanchev "
     "et al. 2020 (variant B): over the pairs of candidates of one task that the raters rated "
     "apart, (concordant - discordant) / all of them, a pair the metric ties counting in the "
     "total only (so lowering the tau); pooled over the tasks."),
    ("kendall tau b, kendall tau c", lambda r, c: _statistic_used(r, "kendall_tau_b"),
     "Kendall's rank correlation with ties corrected as in its b and c variants (c: Stuart's, "
     "for a rating and a metric that take different numbers of values)."),
    ("pairwise accuracy", lambda r, c: _statistic_used(r, "pairwise_accuracy"),
     "acc23 (Deutsch, Foster & Freitag 2023): the share of all pairs of rows that the metric "
     "orders as the rating does, where a tie agrees only with a tie: a metric that ties most "
     "pairs the raters set apart (pass, exact match) scores low even where it correlates."),
    ("pairwise accuracy tc", lambda r, c: _statistic_used(r, "pairwise_accuracy_tc"),
     "the same with tie calibration (Deutsch et al. 2023, Algorithm 1): metric differences up "
     "to the threshold that maximises the accuracy count as ties, the threshold chosen on these "
     "rows (so it is optimistic)."),
    ("score.pass, score.pass_rate", lambda r, c: any(
        m in (r.get("metrics") or []) for m in ("score.pass", "score.pass_rate")),
     "pass: 1 where every test case of the row passed, else 0; pass_rate: the share of its "
     "cases that passed."),
    ("weight per SD", lambda r, c: c is not None,
     "the hybrid's change, in rating points, for one training standard deviation more of the "
     "feature, the others held (the ordinal model: in log-odds); the nonneg model keeps every "
     "weight at 0 or above, so a CI that reaches 0 says resamples often left the feature out, "
     "and features that say the same (two CodeBERTScore F1s) share the weight between them."),
    ("intercept, intercept per unit", lambda r, c: c is not None,
     "the hybrid's prediction where every feature is at its training mean, and where every raw "
     "score is 0, which may lie off the scale (the hybrid is clipped to it)."),
    ("Calibration (clip), (isotonic)", lambda r, c: c is not None,
     "clip: the hybrid's prediction clipped to the rating scale, and nothing more (the "
     "card's calibration none); isotonic: then mapped through a monotone fit of the training "
     "rows' predictions onto their ratings. The table bins the held-out (out-of-fold) "
     "predictions of the cross-validation's first repeat."),
)


def _statistic_used(results: Mapping[str, Any], statistic: str) -> bool:
    return any(statistic in values for level in (results.get("agreement") or {}).values()
               for values in level.values())


def _terms(results: Mapping[str, Any], card: Mapping[str, Any] | None) -> Section:
    section = Section("terms", "Terms")
    section.blocks += [f"{term}: {meaning}" for term, used, meaning in TERMS
                       if used(results, card)]
    if results.get("focus_rule") and "best" in str(results["focus_rule"]):
        section.blocks.append(
            f"The metric compared against the others, {results['focus']}, was chosen as "
            f"{results['focus_rule']} on these rows: its one-sided tests against the others are "
            "optimistic, as the choice and the tests rest on the same data (name one with "
            "--focus, or give a metric card, for tests that do not).")
    return section


def _settings(results: Mapping[str, Any]) -> Section:
    settings = results.get("settings") or {}
    section = Section("settings", "Settings and signatures")
    if settings:
        section.blocks.append(key_value_table("Audit settings", settings, exact=True))
    else:
        section.blocks.append("The results record no settings.")
    scorers = results.get("scorers")
    if scorers:
        section.blocks.append("The scores come from these scorers (their signatures: every "
                              "setting a score depends on):")
        section.blocks.extend(Code(f"Scorer {alias}", text) for alias, text in scorers.items())
    else:
        section.blocks.append("The results record no scorer signatures.")
    return section


def headline(results: Mapping[str, Any]) -> str:
    """The best metric at each level against the human ceiling at that level."""
    agreement = results.get("agreement") or {}
    reference = ceiling_by_level(results)
    sentences = []
    for level in [lv for lv in agreement if lv in reference] or list(agreement)[:1]:
        stats = [s for s in statistics_of(agreement[level]) if s in reference.get(level, {})]
        stats = stats or statistics_of(agreement[level])[:1]
        if not stats:
            continue
        stat = stats[0]
        scored = [(m, v[stat]) for m, v in agreement[level].items()
                  if is_estimate(v.get(stat)) and v[stat]["value"] is not None]
        if not scored:
            continue
        scored.sort(key=lambda pair: -pair[1]["value"])
        top = [m for m, v in scored if v["value"] == scored[0][1]["value"]]
        (best, estimate), runner = scored[0], scored[1] if len(scored) > 1 else None
        named = ", ".join(_named(m, results) for m in top)
        text = f"{LEVEL_NAMES.get(level, label(level))}, {label(stat)}: "
        if len(top) > 1:
            text += f"best metrics, tied, {named}, {fmt(estimate['value'])}"
        else:
            text += f"best metric {named}, {fmt_estimate(estimate)}"
            if runner is not None:
                text += _against_runner(results, level, stat, best, runner)
        if stat in reference.get(level, {}):
            text += (f"; human ceiling {fmt_estimate(reference[level][stat])} (one rater "
                     "against the others: a conservative ceiling)")
            if level == "item" and stat == "pearson":
                text += _perfect_metric(results)
        sentences.append(text + ".")
    if not reference:
        ceiling = results.get("ceiling")
        reason = ceiling.get("reason") if isinstance(ceiling, Mapping) else None
        sentences.append(f"Human ceiling: not computed ({reason or 'no per-rater ratings'}).")
    return " ".join(sentences)


def _named(metric: str, results: Mapping[str, Any]) -> str:
    """A metric as the headline names it: the hybrid says where it was fitted on these rows."""
    if metric == HYBRID_COLUMN and IN_SAMPLE_SOURCE in str(results.get("hybrid_source")):
        return f"{metric} (a metric card's, {IN_SAMPLE_SOURCE})"
    return metric


def _alpha(results: Mapping[str, Any]) -> float:
    """The significance level of the results' settings (else :data:`ALPHA`)."""
    return float((results.get("settings") or {}).get("alpha", ALPHA))


def _against_runner(results: Mapping[str, Any], level: str, stat: str, best: str,
                    runner: tuple[str, Any]) -> str:
    """``, above score.chrf (0.512) by 0.021 [-0.003, 0.045], p 0.168 (permutation, Holm): not
    significant``: how the best metric's lead over the next holds up, from the comparison of
    the two where the audit made one."""
    name, estimate = runner
    alpha = _alpha(results)
    for row in results.get("comparisons") or []:
        if (row["level"], row["statistic"]) != (level, stat):
            continue
        if (row["a"], row["b"]) == (name, best):  # (the lead is -delta, its CI reversed)
            ci = row.get("ci")
            lead = {"value": None if row.get("delta") is None else -row["delta"],
                    "ci": None if ci is None else [-ci[1], -ci[0]]}
            return (f", above {name} ({fmt(estimate['value'])}) by {fmt_estimate(lead)} "
                    f"(the audit tests {name} against the others, one-sided, not this lead)")
        if (row["a"], row["b"]) == (best, name):
            for key, test in (("p_holm", "permutation, Holm"),
                              ("p_williams_holm", "Williams, Holm")):
                if row.get(key) is not None:
                    verdict = "significant" if row[key] < alpha else "not significant"
                    delta = {"value": row["delta"], "ci": row.get("ci")}
                    return (f", above {name} ({fmt(estimate['value'])}) by "
                            f"{fmt_estimate(delta)}, p {fmt_p(row[key], alpha)} ({test}): "
                            f"{verdict}")
    return f", then {name} ({fmt(estimate['value'])}; no test compares the two)"


def build(results: Mapping[str, Any], frame: pd.DataFrame,
          card: Mapping[str, Any] | None) -> list[Section]:
    """All sections of the report, in reading order."""
    check_columns(frame, results)
    alpha = _alpha(results)
    sections = [_overview(results), _ceiling(results), _agreement(results),
                _significance(results, alpha)]
    if "pass_value" in results:
        sections.append(_pass_value(results))
    if "by_system" in results:
        sections.append(_by_system(results))
    return sections + [_strips(results, frame), _hybrid(card, alpha), _terms(results, card),
                       _settings(results)]
