"""The ``validate_prompts`` stage: the prompt groups' similarity, overlap and length ratios
(:mod:`promptlottery.prompts.validation`) written to validation.csv / .md, and with
``validation.equivalence=true`` the backbone's rating of each paraphrase through the call loop.

    python -m run +experiment=validate_prompts
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from promptlottery.prompts.groups import PromptGroup, list_groups, load_group
from promptlottery.prompts.validation import (
    DEFAULT_THRESHOLD,
    TARGET_MAX_OVERLAP,
    TARGET_SIMILARITY,
    TEXT_MODE,
    Encoder,
    equivalence_summary,
    paper_comparison,
    rate_equivalence,
    summarize,
    to_markdown,
    validate_variants,
)
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.staging import staged_outputs


def validate_prompts(cfg, job: StageJob) -> dict[str, Any]:
    """Stage ``validate_prompts``: validation.csv / .md of the prompt groups, and the record."""
    res = run_validation(cfg, job.output_dir)
    return job.write(res.pop("status"), **res)


def _option(options: Any, key: str, default: Any) -> Any:
    if options is None:
        return default
    value = options.get(key, default) if hasattr(options, "get") else default
    return default if value is None else value


def _select_groups(spec: Any, groups_dir: str | None) -> list[PromptGroup]:
    if spec in (None, "all"):
        ids = list_groups(groups_dir)
    elif isinstance(spec, str):
        ids = [s.strip() for s in spec.split(",") if s.strip()]
    else:
        ids = [str(s) for s in spec]
    if not ids:
        raise ValueError("validation.groups selects no prompt group")
    return [load_group(gid, groups_dir) for gid in ids]


def run_validation(
    cfg, output_dir: str | Path, *, backend: Any = None, encoder: Encoder | None = None
) -> dict[str, Any]:
    """Stage ``validate_prompts``: validate the prompt groups; write validation.csv / .md to ``output_dir``.

    Options (``cfg.validation``): ``threshold`` (flag a paraphrase below this similarity to P1),
    ``groups`` (``all``, a list of ids or a comma-separated string), ``target_similarity``,
    ``max_overlap`` and ``groups_dir`` (defaults: the packaged groups), ``equivalence`` (default
    false: loads no dataset or LLM; true: the backbone rates each paraphrase, see
    :func:`rate_equivalence`, written to ``validation_equivalence.csv`` / ``.md``). ``backend`` and
    ``encoder`` replace the backbone's backend and the sentence encoder (tests).
    """
    from omegaconf import OmegaConf

    options = cfg.get("validation") if hasattr(cfg, "get") else None
    if options is not None and OmegaConf.is_config(options):
        options = OmegaConf.to_container(options, resolve=True)
    threshold = float(_option(options, "threshold", DEFAULT_THRESHOLD))
    target_similarity = float(_option(options, "target_similarity", TARGET_SIMILARITY))
    max_overlap = float(_option(options, "max_overlap", TARGET_MAX_OVERLAP))
    groups_dir = _option(options, "groups_dir", None)
    groups = _select_groups(_option(options, "groups", "all"), groups_dir)

    output_dir = Path(output_dir)
    note = (
        f"Texts compared: {TEXT_MODE}. Similarity: cosine of all-MiniLM-L6-v2 embeddings. "
        f"Lexical overlap: token Jaccard, mean over variant pairs. Length ratio: words / words of P1 "
        f"(P2-P5). Flagged: similarity to P1 < {threshold}. Target: mean sim (pairs) >= {target_similarity} "
        f"and lexical overlap <= {max_overlap}."
    )
    with staged_outputs(output_dir) as staging:  # the one writer: staged, then published together
        equivalence = None
        if bool(_option(options, "equivalence", False)):
            equivalence = _equivalence(cfg, groups, staging, backend)
        variants = validate_variants(groups, threshold=threshold, encoder=encoder)
        summary = summarize(variants, target_similarity=target_similarity, max_overlap=max_overlap)
        summary.to_csv(staging / "validation.csv", index=False)
        variants.to_csv(staging / "validation_variants.csv", index=False)
        table = to_markdown(summary)
        (staging / "validation.md").write_text(
            f"# Paraphrase validation\n\n{note}\n\n{table}\n\n{paper_comparison(summary, equivalence)}\n",
            encoding="utf-8",
        )
    flagged = variants[variants["flagged"]]
    missed = summary.loc[~summary["meets_target"], "group"].tolist()
    print(note)
    print(table)
    if len(flagged):
        print(
            "flagged variants:",
            ", ".join(f"{r.group}/{r.variant} ({r.sim_to_p1:.3f})" for r in flagged.itertuples()),
        )
    print(
        f"groups meeting the target: {int(summary['meets_target'].sum())}/{len(summary)}"
        + (f"; missed: {missed}" if missed else "")
    )
    if equivalence is not None:
        print(
            f"LLM equivalence rating backbone={equivalence['backbone']}: "
            f"{equivalence['share_accepted']:.1%} of {equivalence['n_answered']} paraphrases accepted "
            f"(paper: {equivalence['paper']})"
        )
    return {
        "status": "ok",
        **({"equivalence": equivalence} if equivalence is not None else {}),
        "n_groups": len(summary),
        "n_flagged": int(len(flagged)),
        "flagged": [f"{r.group}/{r.variant}" for r in flagged.itertuples()],
        "groups_missing_target": missed,
        "threshold": threshold,
        "text_mode": TEXT_MODE,
        "summary": summary.to_dict("records"),
        "outputs": {"csv": str(output_dir / "validation.csv"), "markdown": str(output_dir / "validation.md")},
    }


def _equivalence(cfg, groups: list[PromptGroup], output_dir: Path, backend: Any) -> dict[str, Any]:
    """Rate every paraphrase with the stage's backbone; write validation_equivalence.csv / .md."""
    from promptlottery.calls.compose import build_backend, build_calls

    backend = build_backend(cfg.backbone.backend, backend)
    cache, _ = build_calls(cfg)  # the question's own decoding: rate_equivalence
    ratings = rate_equivalence(
        groups, backend, cache, prompt_format=cfg.backbone.prompt_format, backbone=cfg.backbone.name
    )
    ratings.to_csv(output_dir / "validation_equivalence.csv", index=False)
    s = equivalence_summary(ratings)
    share = "n/a" if not np.isfinite(s["share_accepted"]) else f"{s['share_accepted']:.1%}"
    per_group = ratings.groupby("group", sort=False)["accepted"].mean()
    lines = [
        "# Paraphrase validation: LLM rating of equivalence",
        "",
        f"Judge: {s['backbone']}. Question (ours): does instruction B (a paraphrase) ask for the same judgment "
        "as instruction A (P1)? Yes / No, argmax of the two labels' probabilities.",
        "",
        "| measure | paper (§3.1) | ours |",
        "|---|---|---|",
        f"| LLM rating of equivalence (share of paraphrases accepted) | {s['paper']} | {share} "
        f"({s['n_answered']} of {s['n_paraphrases']} answered) |",
        "",
        "| group | share accepted |",
        "|---|---|",
        *(f"| {g} | {v:.2f} |" if np.isfinite(v) else f"| {g} | n/a |" for g, v in per_group.items()),
    ]
    (output_dir / "validation_equivalence.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return s
