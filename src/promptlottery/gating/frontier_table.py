"""The gate's frontier as one Markdown block for experiments/README.md, from a gate run's
``results.json`` (``experiments/gate_frontier.py`` runs the stage and calls :func:`frontier_markdown`).

Every cell is the run's own figure with its item-cluster interval; nothing is recomputed here.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.gating.frontier import PAPER_HEADLINE

__all__ = ["frontier_markdown"]


def _ci(r: dict, axis: str, pct: bool) -> str:
    v, lo, hi = r.get(axis), r.get(f"{axis}_lo"), r.get(f"{axis}_hi")
    if v is None or pd.isna(v):
        return "undefined"
    if pct:
        return f"{v:.0%} [{lo:.0%}, {hi:.0%}]" if not pd.isna(lo) else f"{v:.0%}"
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]" if not pd.isna(lo) else f"{v:.2f}"


def _main_table(rows: list[dict]) -> list[str]:
    out = [
        "| policy | parameter (chosen on validation) | calls per item | calls saved | decisions recovered "
        "| agreement with the human label (items) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        par = r.get("parameter")
        par = "" if par is None or pd.isna(par) else f"{par:.3g}"
        human = _ci(r, "human_agreement", True)
        out.append(
            f"| {r['policy']} | {par} | {_ci(r, 'calls', False)} | {_ci(r, 'calls_saved', True)} | "
            f"{_ci(r, 'recovered', True)} | {human} ({r.get('n_items_human', 0)}) |"
        )
    return out


def _headline(rows: list[dict]) -> list[str]:
    paper = PAPER_HEADLINE
    out = [
        "| | calls saved | decisions recovered |",
        "|---|---|---|",
        f"| **{paper['policy']}** | {paper['calls_saved']:.0%} (no interval given) | "
        f"{paper['recovered']:.0%} (no interval given) |",
    ]
    for r in rows:
        if r["policy"] == "paper_gate":
            out.append(
                f"| ours: the paper's policy (our gate on P1, else adaptive 3 of 5; {r['n_items']} test items) "
                f"| {_ci(r, 'calls_saved', True)} | {_ci(r, 'recovered', True)} |"
            )
    return out


def _cell(r: dict | None) -> str:
    """``calls [lo, hi] / recovered [lo, hi]``: both axes with their item-cluster intervals."""
    return "" if r is None else f"{_ci(r, 'calls', False)} / {_ci(r, 'recovered', True)}"


def _transfer(rec: dict[str, Any]) -> list[str]:
    unseen = {r["policy"]: r for r in rec.get("frontier_unseen_configs") or []}
    held = {r["policy"]: r for r in rec.get("frontier_heldout_group") or []}
    if not unseen and not held:
        return []
    head = "| policy | test (calls / recovered) |"
    if unseen:
        u = next(iter(unseen.values()))
        head += (
            f" unseen configurations {', '.join(rec.get('transfer_configs') or [])} ({u['n_items']} items) |"
        )
    if held:
        h = next(iter(held.values()))
        groups = ", ".join(rec.get("heldout_groups") or [])
        head += f" held-out group {groups} ({h['n_items']} items, {h['n_configs']} configuration(s)) |"
    out = [head, "|---" * (head.count("|") - 1) + "|"]
    test = {r["policy"]: r for r in rec["frontier"]}
    for policy in test:
        row = f"| {policy} | {_cell(test.get(policy))} |"
        if unseen:
            row += f" {_cell(unseen.get(policy))} |"
        if held:
            row += f" {_cell(held.get(policy))} |"
        out.append(row)
    return out


def frontier_markdown(rec: dict[str, Any], *, command: str, wall_s: float, runs: list[str]) -> str:
    """The README block: data, command and wall time, the frontier with intervals, the paper's
    headline row beside ours, the transfer rows (or why there are none) and the recommendation."""
    rows = rec["frontier"]
    r0 = rows[0]
    split = rec.get("split") or {}
    fitted = list((rec.get("summary") or {}).get("configs") or [])
    left = list(rec.get("transfer_configs") or [])
    lines = [
        f"Judgments of {r0.get('backbones', '?')}: {len(runs)} configuration dir(s) with judgments under the "
        f"glob ({', '.join(runs)}); used: {len(fitted) + len(left)} complete configuration(s), "
        f"{len(fitted)} for training / validation / test ({', '.join(fitted)})"
        + (f" and {len(left)} left out for transfer ({', '.join(left)})" if left else "")
        + " (a configuration missing a wording's judgments is left out by the loader; the run's log names it)."
        + (
            f" Split by source (ours: {split['sources']['train']} / {split['sources']['validation']} / "
            f"{split['sources']['test']} sources, each whole in one part): "
            if split.get("by") == "source"
            else " Split instance-disjoint: "
        )
        + f"{split.get('train')} train / "
        f"{split.get('validation')} validation / {split.get('test')} test items. Every figure below: "
        f"{r0['n_items']} test items in {r0['n_configs']} configuration(s), 95% item-cluster bootstrap "
        "intervals; thresholds and stopping confidences chosen on the validation items for 86% recovered.",
        "",
        "```bash",
        command + f"   # {wall_s:.0f} s",
        "```",
        "",
        *_main_table(rows),
        "",
        "The paper's headline row (§5.2) beside ours:",
        "",
        *_headline(rows),
        "",
        f"**{rec['recommendation']}**",
        "",
    ]
    tr = _transfer(rec)
    if tr:
        lines += [
            "Transfer (calls per item / decisions recovered [interval]; the same thresholds):",
            "",
            *tr,
            "",
        ]
    if not rec.get("frontier_unseen_configs"):
        lines += [
            "No transfer by configuration: no configuration was left out (or none had unseen items).",
            "",
        ]
    elif len(fitted) == 1:
        lines += [_one_config_note(fitted[0], left), ""]
    if not rec.get("frontier_heldout_group"):
        lines += [f"Held-out prompt group (G15): not evaluated. {rec.get('transfer_note', '')}", ""]
    return "\n".join(lines + _mcc_lines(rec.get("classifier_intervals") or []))


def _one_config_note(fitted: str, left: list[str]) -> str:
    """What a transfer split with a single training configuration can and cannot show."""
    return (
        f"With one configuration for training ({fitted}), the transfer column is one configuration "
        f"learned and {len(left)} other(s) unseen ({', '.join(left)}): it shows whether the thresholds and "
        "the gate fitted on one dataset and criterion carry over to another, not how transfer varies "
        "across configurations, and the test column holds that one configuration's items only."
    )


def _mcc_lines(rows: list[dict]) -> list[str]:
    """Each gate's MCC (cut 0.5) on each part with its item-cluster interval, one line per gate."""
    lines = []
    for name in dict.fromkeys(r["classifier"] for r in rows):
        mine = [r for r in rows if r["classifier"] == name]
        cells = "; ".join(
            f"{r['part']} {r['mcc']:.3f} [{r['mcc_lo']:.3f}, {r['mcc_hi']:.3f}] ({r.get('n_rows', '?')} verdicts)"
            for r in mine
        )
        lines += [f"MCC of {name} (cut 0.5): {cells}.", ""]
    return lines
