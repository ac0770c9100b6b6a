"""The gate stage's frontier step: every policy on the test items (and on left-out configurations),
its report section, result fields and tracker logs (:mod:`promptlottery.gating.frontier` computes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.gating import report as rep
from promptlottery.gating.config import GateConfig
from promptlottery.gating.simulate import item_block
from promptlottery.gating.split import GateData

__all__ = ["append_frontier", "evaluate_frontier", "frontier_section", "frontier_tables", "log_frontier"]


def evaluate_frontier(g: GateConfig, data: GateData) -> dict[str, Any]:
    """Every policy on the test items (and on the left-out configurations' unseen items), at the
    thresholds and confidences chosen on the validation items, with item-cluster intervals
    (:mod:`~promptlottery.gating.frontier`); the learned gate's test MCC with its interval. Writes
    nothing: :func:`frontier_tables` are the stage's to write."""
    from promptlottery.gating import frontier as fr

    boot = {"n_resamples": g.n_bootstrap, "level": g.bootstrap_level, "seed": g.seed}
    parts = {"val": data.val, "test": data.test}
    for part, df in (("config_transfer", data.config_transfer), ("transfer", data.transfer)):
        if len(df):
            parts[part] = df
    for part, p in fr.stacked_gate(data.val, parts, seed=g.seed).items():
        parts[part]["p_stack"] = p
    val_block = item_block(data.val, data.variants)
    params = fr.choose_parameters(val_block, data.val, g.target_recovery, seed=g.seed)
    sparse = tuple(
        {"budget": d.budget, "anchor": d.anchor, "full_share": d.full_share} for d in g.sparse_designs
    )
    kw = {"first_k": tuple(g.first_k), "sparse_designs": sparse, "target": g.target_recovery, **boot}
    test = fr.frontier(item_block(data.test, data.variants), data.test, params, label="test", **kw)
    mccs = pd.DataFrame(
        [
            {"part": part, "classifier": name, **fr.mcc_interval(
                df["in_cluster"].to_numpy(), df[col].to_numpy(), df["item_key"].to_numpy(), **boot)}
            for part, df in (("test", data.test), ("config_transfer", data.config_transfer),
                             ("heldout_group", data.transfer))
            if len(df)
            for name, col in (("learned_gate", "p_gate"), ("stacked_gate", "p_stack"),
                              ("confidence", "confidence"))
        ]
    )  # fmt: skip
    # which judges these are, in every table (a fake backend's run says "fake" in each)
    backbones = ",".join(sorted(set(data.test["backbone"].astype(str))))
    test.table["backbones"], mccs["backbones"] = backbones, backbones
    result = {
        "test": test,
        "mcc": mccs,
        "configs": None,
        "transfer_configs": data.transfer_configs,
        "heldout_group": None,
        "heldout_groups": list(data.held_out),
        "heldout_note": data.transfer_note,
        "backbones": backbones,
    }
    # the configuration as a column: each configuration's test items on their own
    result["by_config"] = fr.by_configuration(item_block(data.test, data.variants), data.test, params, **kw)
    if len(data.config_transfer):
        result["configs"] = fr.frontier(
            item_block(data.config_transfer, data.variants), data.config_transfer, params,
            label="unseen configurations", **kw,
        )  # fmt: skip
    if len(data.transfer):  # the held-out prompt group (G15): trained on the other groups only
        result["heldout_group"] = fr.frontier(
            item_block(data.transfer, data.variants), data.transfer, params,
            label=f"held-out group {','.join(data.held_out)}", **kw,
        )  # fmt: skip
    return result


def frontier_tables(fr_out: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The frontier's tables by file name: the test items', the headline, the MCC intervals, per
    configuration, and those of the unseen configurations and the held-out group where evaluated."""
    tables = {
        "frontier": fr_out["test"].table,
        "frontier_headline": fr_out["test"].headline,
        "classifier_intervals": fr_out["mcc"],
        "frontier_by_config": fr_out["by_config"],
    }
    for name, key in (("frontier_unseen_configs", "configs"), ("frontier_heldout_group", "heldout_group")):
        if fr_out[key] is not None:
            tables[name] = fr_out[key].table
    return tables


def frontier_section(fr_out: dict[str, Any], g: GateConfig) -> str:
    """The report's frontier section: the tables, the paper's row beside ours, the recommendation."""
    test = fr_out["test"]
    cols = ["policy", "parameter", "calls", "calls_lo", "calls_hi", "recovered", "recovered_lo",
            "recovered_hi", "human_agreement", "human_agreement_lo", "human_agreement_hi", "n_items_human"]  # fmt: skip
    n_items, n_cfg = int(test.table["n_items"].iloc[0]), int(test.table["n_configs"].iloc[0])
    lines = [
        "## Cost-robustness frontier (every policy, the same test items)",
        "",
        f"Judgments of backbone(s) {fr_out['backbones']}. "
        f"{n_items} test items in {n_cfg} configuration(s); {g.bootstrap_level:.0%} item-cluster bootstrap "
        f"intervals ({g.n_bootstrap} resamples, clusters = item_key); thresholds and stopping confidences "
        f"chosen on the validation items for {g.target_recovery:.0%} recovered.",
        "",
        rep.to_markdown(test.table[cols].round(3)),
        "",
        "The paper's headline row beside ours (calls saved at 86% recovered):",
        "",
        rep.to_markdown(test.headline.round(3)),
        "",
        f"**{test.recommendation}**",
        "",
        "The learned gate's MCC (cut 0.5) with its interval:",
        "",
        rep.to_markdown(fr_out["mcc"].round(3)),
        "",
    ]
    by = fr_out.get("by_config")
    if by is not None and len(by) and by["config_id"].nunique() > 1:
        cell = by.assign(
            cell=[f"{c:.2f} / {r:.0%} [{lo:.0%}, {hi:.0%}]" for c, r, lo, hi in
                  zip(by["calls"], by["recovered"], by["recovered_lo"], by["recovered_hi"])]
        )  # fmt: skip
        pivot = cell.pivot(index="config_id", columns="policy", values="cell")
        pivot = pivot[[p for p in test.table["policy"] if p in pivot.columns]].reset_index()
        pivot.insert(
            1, "test items", by.groupby("config_id")["n_items"].first().reindex(pivot["config_id"]).to_numpy()
        )
        lines += [
            "### Per configuration (calls per item / recovered [interval], the test items of each)",
            "",
            rep.to_markdown(pivot),
            "",
        ]
    if fr_out["configs"] is not None:
        t = fr_out["configs"].table
        lines += [
            f"### Transfer to unseen configurations ({', '.join(fr_out['transfer_configs'])}: "
            f"{int(t['n_items'].iloc[0])} items no training row holds)",
            "",
            rep.to_markdown(t[cols].round(3)),
            "",
        ]
    elif fr_out["transfer_configs"]:
        lines += ["No item of the left-out configurations is free of training rows: no transfer figure.", ""]
    return "\n".join(lines + heldout_lines(fr_out, cols))


def heldout_lines(fr_out: dict[str, Any], cols: list[str]) -> list[str]:
    """The held-out prompt group's (G15) frontier, or one line saying why there is none."""
    held = fr_out.get("heldout_group")
    if held is None:
        return [f"**Held-out prompt group (G15): not evaluated.** {fr_out.get('heldout_note', '')}", ""]
    t = held.table
    return [
        f"### Transfer to the held-out prompt group {', '.join(fr_out['heldout_groups'])} "
        f"({int(t['n_items'].iloc[0])} items in {int(t['n_configs'].iloc[0])} configuration(s); the gate "
        "and every threshold were fitted on the other groups' configurations)",
        "",
        rep.to_markdown(t[cols].round(3)),
        "",
    ]


def append_frontier(report: Path, fr_out: dict[str, Any], g: GateConfig) -> dict[str, Any]:
    """Append the frontier section to ``report``; the frontier's fields of the result record."""
    with report.open("a") as fh:
        fh.write("\n" + frontier_section(fr_out, g) + "\n")
    unseen, held = fr_out["configs"], fr_out["heldout_group"]
    return {
        "frontier": fr_out["test"].table.to_dict("records"),
        "frontier_parameters": fr_out["test"].parameters,
        "recommendation": fr_out["test"].recommendation,
        "classifier_intervals": fr_out["mcc"].to_dict("records"),
        "frontier_by_config": fr_out["by_config"].to_dict("records"),
        "frontier_unseen_configs": None if unseen is None else unseen.table.to_dict("records"),
        "frontier_heldout_group": None if held is None else held.table.to_dict("records"),
        "heldout_groups": fr_out["heldout_groups"],
        "transfer_configs": fr_out["transfer_configs"],
    }


def log_frontier(tracker, fr_out: dict[str, Any]) -> None:
    """The frontier's rows to stdout and to the tracker (a table and a calls-vs-recovered line)."""
    test = fr_out["test"]
    for r in test.table.itertuples(index=False):
        print(
            f"gate frontier policy={r.policy} calls={r.calls:.2f} [{r.calls_lo:.2f}, {r.calls_hi:.2f}] "
            f"recovered={r.recovered:.3f} [{r.recovered_lo:.3f}, {r.recovered_hi:.3f}] "
            f"human_agreement={r.human_agreement:.3f} [{r.human_agreement_lo:.3f}, {r.human_agreement_hi:.3f}] "
            f"(on {r.n_items_human} items) items={r.n_items} configs={r.n_configs}"
        )
    for r in fr_out["mcc"].itertuples(index=False):
        print(
            f"gate mcc part={r.part} classifier={r.classifier} mcc={r.mcc:.3f} [{r.mcc_lo:.3f}, {r.mcc_hi:.3f}]"
        )
    print(f"gate recommendation: {test.recommendation}")
    tracker.log_table("frontier", test.table)
    for name, part in (
        ("frontier_unseen_configs", fr_out["configs"]),
        ("frontier_heldout_group", fr_out["heldout_group"]),
    ):
        if part is not None:
            tracker.log_table(name, part.table)
    tracker.log_line(
        "frontier_line",
        test.table[["policy", "calls", "recovered"]],
        x="calls",
        y="recovered",
        title="calls per item vs decisions recovered (test items)",
    )
