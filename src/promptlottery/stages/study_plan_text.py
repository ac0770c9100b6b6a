"""The study plan's totals, SLURM layouts and text (``study_dry_run.{json,md}``); the plan itself is
:mod:`promptlottery.stages.study_plan`."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

APPROX = "approx_chars_div_4"
#: the line a fake judge's sweep gets when real models write the judged answers (SQuAD v2's systems)
FAKE_PREDICTIONS = (
    "note: backbone=fake judges, but the candidate answers it judges are written by real models (the "
    "predict stage's systems, listed above), once, then cached"
)


def slurm_layouts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The two ways of running the GPU / CPU jobs on SLURM without one engine load per job, in device
    hours: one task per configuration x backbone (its wordings in one process: one load per task), or
    one server per backbone with the jobs as its clients (one load per backbone, the server up for the
    whole of its backbone's judging). The cheaper one is ``chosen``; a load per job is shown beside."""
    out: dict[str, Any] = {}
    for device in ("gpu", "cpu"):
        mine = [r for r in rows if r["device"] == device and r["hours"] is not None]
        if not mine:
            continue
        judging = sum(r["hours"] for r in mine)
        load = {r["backbone"]: r["throughput"]["engine_load_s"] / 3600 for r in mine}
        tasks = {(r["configuration"], r["backbone"]) for r in mine}
        per_job = judging + sum(load[r["backbone"]] for r in mine)
        per_task = judging + sum(load[bb] for _, bb in tasks)
        per_server = judging + sum(load.values())
        layouts = {
            "task_per_job": {"tasks": len(mine), "engine_loads": len(mine), "hours": per_job},
            "task_per_configuration_backbone": {
                "tasks": len(tasks),
                "engine_loads": len(tasks),
                "hours": per_task,
            },
            "server_per_backbone": {"tasks": len(load), "engine_loads": len(load), "hours": per_server},
        }
        chosen = min(
            ("task_per_configuration_backbone", "server_per_backbone"), key=lambda k: layouts[k]["hours"]
        )
        out[device] = {"judging_hours": judging, **layouts, "chosen": chosen}
    return out


def summarize_plan(rows: list[dict[str, Any]], measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """Totals of a study plan: overall, per backbone, per configuration; the predict stages; SLURM;
    ``measured`` (:func:`~promptlottery.stages.study_plan.measured_throughput`): the rate each backbone
    judged at in the study's finished jobs, and the hours left at that rate."""

    def total(rs: list[dict[str, Any]]) -> dict[str, Any]:
        priced = [r["cost_usd"] for r in rs if r["cost_usd"] is not None]
        hours: dict[str, float] = {}
        for r in rs:
            if r["hours"] is not None:
                hours[r["device"]] = hours.get(r["device"], 0.0) + r["hours"]
        return {
            "conditions": len(rs),
            "calls": sum(r["calls"] for r in rs),
            "cached_calls": sum(r["cached_calls"] for r in rs),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rs),
            "uncached_prompt_tokens": sum(r["uncached_prompt_tokens"] for r in rs),
            "uncached_run_tokens": sum(r.get("uncached_run_tokens", r["uncached_prompt_tokens"]) for r in rs),
            "cost_usd": round(sum(priced), 2) if priced else None,
            **{f"{d}_hours": round(h, 3) for d, h in sorted(hours.items())},
        }

    by = lambda key: {k: total([r for r in rows if r[key] == k]) for k in dict.fromkeys(r[key] for r in rows)}  # noqa: E731
    predicts = [r["predict"] for r in rows if "predict" in r]
    backbones = by("backbone")
    measured = {bb: dict(m) for bb, m in (measured or {}).items() if bb in backbones}
    for bb, m in measured.items():
        m["hours_left"] = round(backbones[bb]["uncached_run_tokens"] / m["tokens_per_s"] / 3600, 3)
    return {
        "token_count": APPROX,
        "total": total(rows),
        "backbones": backbones,
        "measured_throughput": measured,
        "configurations": by("configuration"),
        "throughput": {r["backbone"]: r["throughput"] for r in rows},
        "predict": predicts,
        "slurm": slurm_layouts(rows),
        "jobs": [{k: v for k, v in r.items() if k not in ("throughput", "predict")} for r in rows],
    }


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}"


def format_plan(plan: dict[str, Any], *, study: str = "") -> str:
    """The plan as a person reads it before any call."""
    t = plan["total"]
    hours = ", ".join(f"{k.replace('_', '-')} {v:,.2f}" for k, v in t.items() if k.endswith("_hours"))
    lines = [
        f"{study} plan: {t['conditions']} conditions ({len(plan['configurations'])} configurations x "
        f"{len(plan['backbones'])} backbones x wordings), {_num(t['calls'])} calls ({_num(t['cached_calls'])} "
        f"cached), {_num(t['prompt_tokens'])} prompt tokens ({_num(t['uncached_prompt_tokens'])} uncached), "
        f"API cost ${_num(t['cost_usd'])}" + (f", {hours} of judging" if hours else ""),
        "",
        "| backbone | device | conditions | calls | cached | prompt tokens | API cost USD | hours | at tokens/s "
        "| hours at the rate measured here | measured tokens/s (jobs) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sources = {}
    measured = plan.get("measured_throughput") or {}
    for bb, b in plan["backbones"].items():
        tp, m = plan["throughput"][bb], measured.get(bb)
        sources.setdefault(tp["source"], []).append(bb)
        h = next((v for k, v in b.items() if k.endswith("_hours")), None)
        here = f"{_num(m['hours_left'])} | {m['tokens_per_s']:,.1f} ({m['jobs']})" if m else "- | -"
        lines.append(
            f"| {bb} | {tp['device']} | {b['conditions']} | {_num(b['calls'])} | {_num(b['cached_calls'])} | "
            f"{_num(b['prompt_tokens'])} | {_num(b['cost_usd'])} | {_num(h)} | {_num(tp['tokens_per_s'])} | {here} |"
        )
    lines += ["", "throughput sources:"] + [f"  {', '.join(bbs)}: {src}" for src, bbs in sources.items()]
    for bb, m in measured.items():
        lines.append(
            f"  {bb} measured here: {m['jobs']} finished job(s) of this study judged {m['tokens']:,} uncached "
            f"prompt tokens in {m['seconds']:,.0f} s of wall time, model loads included ({m['tokens_per_s']:,.1f} "
            "tokens/s a process; parallel processes divide the wall time, not the CPU-hours)"
        )
    for p in plan["predict"]:
        calls = sum(s["calls"] for s in p["systems"].values())
        h = sum(s["hours"] or 0 for s in p["systems"].values())
        lines.append("")
        lines.append(
            f"stage {p['stage']} (before any judging): {p['questions']} questions x {len(p['systems'])} candidate "
            f"systems = {calls:,} answers, {h:,.2f} hours on their own backbones "
            f"(into {p['output']}; an answer in the call cache is not asked again)"
        )
        for name, s in p["systems"].items():
            lines.append(
                f"  {name} ({s['backbone']}, {s['device']}): {s['calls']:,} calls, {s['cached_calls']:,} cached, "
                f"{s['prompt_tokens']:,} prompt tokens, {_num(s['hours'])} hours"
            )
    for device, s in plan["slurm"].items():
        lines.append("")
        lines.append(
            f"SLURM, {device}: judging {s['judging_hours']:,.2f} {device}-hours; with engine loads: one task per "
            f"job {s['task_per_job']['engine_loads']} loads {s['task_per_job']['hours']:,.2f} h | one task per "
            f"configuration x backbone {s['task_per_configuration_backbone']['engine_loads']} loads "
            f"{s['task_per_configuration_backbone']['hours']:,.2f} h | one server per backbone "
            f"{s['server_per_backbone']['engine_loads']} loads {s['server_per_backbone']['hours']:,.2f} h "
            f"-> cheaper: {s['chosen'].replace('_', ' ')}"
        )
        lines.append(
            "  the study sweeper runs one task per configuration x backbone with study.layout="
            "configuration_backbone (study.layout=auto: under any launcher but the basic one); one server "
            "per backbone is not started by it: serve each backbone (vllm serve) and judge with an "
            "OpenAI-compatible backbone (docs/study.md)"
        )
    if any(r.get("fake_judge_real_predictions") for r in plan["jobs"]):
        lines += ["", FAKE_PREDICTIONS]
    lines.append("")
    lines.append(
        "note: prompt tokens are approximated for every backbone (characters / 4 + 4 per chat message: the "
        "plan loads no tokenizer; the Hub's are unavailable offline); hours are the uncached prompt tokens "
        "the backbone's forward passes run (a judge that batches by shared prefix, the transformers and "
        "OpenVINO ones, runs a source its batch shares once) / the backbone's declared throughput (backbone.throughput: measured here for the CPU judges, an "
        "assumption for the GPU ones), and where the study has finished jobs also at the rate they judged at "
        "on this machine"
    )
    return "\n".join(lines)


def write_study_plan(plan: dict[str, Any], root: Path, *, study: str) -> Path:
    from promptlottery.atomic import atomic_write_text

    root.mkdir(parents=True, exist_ok=True)
    path = root / "study_dry_run.json"
    atomic_write_text(path, json.dumps({"study": study, **plan}, indent=2, default=str) + "\n")
    atomic_write_text(root / "study_dry_run.md", format_plan(plan, study=study) + "\n")
    return path
