"""The human-baseline stages (``conf/human/``): campaign, export, import (its own module,
:mod:`promptlottery.stages.human_import`), analyse.

    python -m run +human=campaign dataset=fed_turn judge=dialogue_understandable dataset.limit=50
    python -m run +human=export human.campaign=DIR human.label_studio_url=URL   # every project's export
    python -m run +human=import human.campaign=DIR human.export='DIR/export_*.json'   # or human.table=FILE
    python -m run +human=analyse human.ratings=DIR/human_ratings.parquet human.runs='outputs/.../*'

The options are the ``human:`` node, checked by :class:`HumanOptions` (one-line ConfigError for an
unknown key or a bad value) before any output. ``promptlottery.stages.STAGES`` maps each name to
its module (``stage=human_campaign`` runs :func:`human_campaign`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.checks import check_choice, check_int, check_open, fail, is_int, known_options
from promptlottery.errors import ConfigError
from promptlottery.human.assignment import SAME_ITEM, Design
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.staging import staged_outputs

logger = logging.getLogger(__name__)


@dataclass
class HumanOptions:
    """The ``human:`` node (see ``conf/human/*.yaml`` for each key)."""

    name: str = "campaign"
    # campaign
    annotators: Any = 10
    raters_per_task: int = 3
    wordings_per_item: int | None = None
    wordings: list[str] | None = None
    same_item: str = "not_back_to_back"
    seed: int = 0
    label_studio_url: str | None = None
    api_key_env: str = "LABEL_STUDIO_API_KEY"
    # the email of each annotator's Label Studio user ({annotator} and {campaign} filled in), or a mapping
    user_email: Any = "{annotator}@example.org"
    # import
    campaign: str | None = None
    export: Any = None
    table: str | None = None
    # analyse
    ratings: str | None = None
    runs: Any = None
    verdict: str = "argmax"
    reference: str = "P1"
    temperature: float | None = None
    n_resamples: int = 1000
    level: float = 0.95
    alpha_level: str = "nominal"
    report: str = "human_report.md"
    judge_bench: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_choice("human.same_item", self.same_item, SAME_ITEM)
        a = self.annotators
        if not ((is_int(a) and a >= 2) or (isinstance(a, list) and len(a) >= 2)):
            raise fail("human.annotators", a, "a number >= 2 or a list of at least two annotator ids")
        check_int("human.n_resamples", self.n_resamples, lo=1)
        check_open("human.level", self.level, 0, 1)

    @classmethod
    def from_dict(cls, d: dict | None) -> HumanOptions:
        d = dict(d or {})
        known_options(d, (f.name for f in fields(cls)), "human")
        return cls(**d)

    @property
    def design(self) -> Design:
        return Design(self.raters_per_task, self.wordings_per_item, self.same_item, self.seed)


def options_of(cfg) -> tuple[HumanOptions, dict]:
    """The checked ``human:`` node and the resolved config."""
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(cfg.human, resolve=True) if cfg.get("human") is not None else {}
    return HumanOptions.from_dict(node), OmegaConf.to_container(cfg, resolve=True)


# --------------------------------------------------------------------------- campaign


def human_campaign(cfg, job: StageJob, **_kw) -> dict[str, Any]:
    """``stage: human_campaign``: the assignment and the Label Studio files (and projects)."""
    opts, config = options_of(cfg)
    return _campaign(cfg, opts, job)


def _campaign(cfg, opts: HumanOptions, job: StageJob) -> dict[str, Any]:
    from omegaconf import OmegaConf

    from promptlottery.data import load_items
    from promptlottery.data.registry import sample_items
    from promptlottery.human.campaign import (
        build_campaign,
        design_counts,
        format_design_counts,
        format_logins,
        write_campaign,
    )
    from promptlottery.human.labelstudio import LabelStudioClient, labeling_config, tasks_for
    from promptlottery.modes import default_group
    from promptlottery.prompts.groups import resolve_group

    opts.design  # noqa: B018 - the design's checks, before anything is loaded
    group = resolve_group(cfg.judge, default_group(cfg.judge))
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True) if cfg.dataset.get("options") else {}
    items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    items = sample_items(
        items, limit=cfg.dataset.limit, seed=cfg.dataset.seed, by=cfg.dataset.get("sample_by", "item")
    )
    c = build_campaign(opts.name, items, group, opts.annotators, opts.design, wordings=opts.wordings)
    counts = design_counts(c.assignment, c.wordings, opts.design)
    print(format_design_counts(counts), flush=True)  # before anything is created
    client = (
        LabelStudioClient(opts.label_studio_url, api_key_env=opts.api_key_env)
        if opts.label_studio_url
        else None
    )
    files = _published(write_campaign, c, job.output_dir)  # first: a failed project creation keeps the files
    if client is not None:
        c.users = client.map_users(_emails(opts, c.annotators))
        c.projects = client.create_projects(
            tasks_for(c.assignment, c.instructions, c.name), labeling_config(c.labels), title=opts.name
        )
        c.label_studio_url = client.url
        files = _published(write_campaign, c, job.output_dir)  # campaign.json with the users and project ids
        print(format_logins(c, client.url), flush=True)
    loads = c.assignment.groupby("annotator").size()
    job.note(
        items=len(c.items), wordings=len(c.wordings), annotators=len(c.annotators), tasks=len(c.assignment)
    )
    return job.ok(
        campaign=c.record() | {"items": len(c.items)},
        n_tasks=len(c.assignment),
        load_min=int(loads.min()),
        load_max=int(loads.max()),
        design_counts=counts,
        files={k: str(v) for k, v in files.items() if k != "tasks"},
        label_studio=opts.label_studio_url or "none: import files written (tasks/<annotator>.json)",
    )


def _published(write, c, out: Path) -> dict[str, Any]:
    """``write(c, staging)`` through the one writer; its ``{name: path}`` with the paths where they ended up
    (``tasks`` left out: a folder of files)."""
    with staged_outputs(out) as staging:
        files = write(c, staging)
    return {k: Path(out) / Path(v).relative_to(staging) for k, v in files.items() if k != "tasks"}


def _emails(opts: HumanOptions, annotators: list[str]) -> dict[str, str]:
    spec = opts.user_email
    if isinstance(spec, dict):
        missing = [a for a in annotators if a not in spec]
        if missing:
            raise ConfigError(f"human.user_email: no email for annotator(s) {missing}")
        return {a: str(spec[a]) for a in annotators}
    if not isinstance(spec, str) or "{annotator}" not in spec:
        raise ConfigError(
            f"human.user_email={spec!r}: a template with {{annotator}} (e.g. '{{annotator}}@lab.org') or a mapping"
        )
    return {a: spec.format(annotator=a, campaign=opts.name) for a in annotators}


# --------------------------------------------------------------------------- export


def human_export(cfg, job: StageJob, **_kw) -> dict[str, Any]:
    """``stage: human_export``: every project of the campaign, exported from Label Studio (JSON) into
    ``export_<annotator>.json`` in the job's directory, all published together once every project is
    exported (the one writer: a failed or killed export leaves the previous files)."""
    from promptlottery.human.campaign import load_campaign
    from promptlottery.human.labelstudio import LabelStudioClient

    opts, config = options_of(cfg)
    if not opts.campaign:
        raise ConfigError("human_export needs human.campaign=<the campaign directory>")
    camp = load_campaign(opts.campaign)
    projects = camp.get("label_studio_projects")
    url = opts.label_studio_url or camp.get("label_studio_url")
    if not projects:
        raise ConfigError(
            f"{opts.campaign}: the campaign has no Label Studio projects (it was made without human.label_studio_url)"
        )
    if not url:
        raise ConfigError("human_export needs human.label_studio_url=<the server> (campaign.json has none)")
    client = LabelStudioClient(url, api_key_env=opts.api_key_env)
    with staged_outputs(job.output_dir) as staging:  # one project failing leaves the earlier exports
        staged = client.export(projects, staging)
        n = {p.stem.removeprefix("export_"): _n_annotated(p) for p in staged}
    paths = [job.output_dir / p.name for p in staged]
    job.note(projects=len(paths), annotations=sum(n.values()))
    return job.ok(exports=[str(p) for p in paths], annotations_per_annotator=n)


def _n_annotated(path: Path) -> int:
    from promptlottery.human.labelstudio import read_json

    return sum(len(t.get("annotations") or []) for t in read_json(path))


# --------------------------------------------------------------------------- analyse


def human_analyse(cfg, job: StageJob, **_kw) -> dict[str, Any]:
    """``stage: human_analyse``: the human-baseline tables, ``human_report.md`` and results.json metrics."""
    opts, config = options_of(cfg)
    return _analyse(opts, job, config)


def _analyse(opts: HumanOptions, job: StageJob, config: dict) -> dict[str, Any]:
    from promptlottery.analysis.common import report as rp
    from promptlottery.analysis.common.human_baseline import render_human_section
    from promptlottery.human.analysis import HumanAnalysisOptions, human_metrics, human_vs_judge
    from promptlottery.human.per_rater import judge_bench_raters, per_rater_table, raters_agreement
    from promptlottery.human.ratings import load_ratings
    from promptlottery.judging.load import load_judgments
    from promptlottery.judging.table import add_verdicts

    a_opts = HumanAnalysisOptions(
        opts.reference, opts.temperature, opts.n_resamples, opts.seed, opts.level, opts.alpha_level
    )
    ratings = load_ratings(opts.ratings) if opts.ratings else None
    judgments = add_verdicts(load_judgments(opts.runs), opts.verdict) if opts.runs else None
    if ratings is None and judgments is None and not opts.judge_bench:
        raise ConfigError(
            "human_analyse needs human.ratings=<human_ratings.parquet>, human.runs=<judgments> or human.judge_bench"
        )
    tables: dict[str, pd.DataFrame] = {}
    if ratings is not None:
        tables.update(human_vs_judge(ratings, judgments, a_opts))
    boot = dict(n_resamples=opts.n_resamples, seed=opts.seed, level=opts.level)
    raters = []
    if judgments is not None:
        raters.append(per_rater_table(judgments, reference=opts.reference, **boot))
    for spec in opts.judge_bench:  # "path:metric"
        path, _, metric = str(spec).rpartition(":")
        if not path:
            raise ConfigError(f"human.judge_bench entry {spec!r}: expected <JUDGE-BENCH json>:<metric>")
        row = raters_agreement(judge_bench_raters(path, metric), **boot)
        raters.append(
            row.assign(
                config_id=f"{Path(path).stem}/{metric}", side="human", wording="the dataset's own instruction"
            )
        )
    raters = [r for r in raters if len(r)]
    if raters:
        tables["human_raters_agreement"] = pd.concat(raters, ignore_index=True)
    out = job.output_dir
    with staged_outputs(out) as staging:  # the one writer: staged, then published together
        for name, t in tables.items():
            rp.write_table(t, name, staging / "tables")
        R = rp.Report("Human baseline")
        render_human_section(
            R, tables, level=opts.level, verdict=opts.verdict if judgments is not None else None
        )
        (staging / opts.report).write_text(R.text(), encoding="utf-8")
    metrics = human_metrics(tables)
    return job.ok(metrics=metrics, report=str(out / opts.report), options=asdict(opts))
