"""Label Studio as the annotation tool: the labeling config, the tasks, and the SDK calls.

Label Studio Community cannot assign a project's tasks to chosen annotators (every member sees
every project), so each annotator's queue is its own project, with ``Sequential sampling``: the
labelling queue serves the tasks in the Data Manager's order, by default the import order, which
is the campaign's order (no item on two consecutive tasks). An annotator can re-sort the Data
Manager or label in someone else's project; the import checks both afterwards (who completed each
annotation, and the order of ``created_at``; :mod:`promptlottery.human.checks`).

What the annotator sees is blind: a task's ``data`` holds only the rendered ``instruction`` (the
wording's prompt for that item, as the judge reads it), the one Data Manager column; the campaign's
keys (``item_id``, ``wording``, ``annotator``, ``position``) go in the task's ``meta``, which the
export keeps and the Data Manager does not show. The projects have no skip button (a skip would
leave the cell short of a rater) and ``maximum_annotations=1``; the choices are the scale's labels.
One Label Studio user per annotator is created (or an existing one with the same email mapped)
and the mapping kept in ``campaign.json``.

The SDK (``label-studio-sdk``, the ``human`` extra) is imported only by :class:`LabelStudioClient`;
the key is read from an environment variable at connection time and never logged or written.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from promptlottery.config import ConfigError

logger = logging.getLogger(__name__)

FROM_NAME = "label"
TO_NAME = "instruction"
SAMPLING = "Sequential sampling"
#: the project settings of every campaign project (what the annotator can and cannot do)
PROJECT_SETTINGS = {
    "sampling": SAMPLING,
    "maximum_annotations": 1,
    "show_skip_button": False,
    "skip_queue": "REQUEUE_FOR_ME",  # a skip sent anyway (through the API) comes back to the same person
    "show_annotation_history": False,
    "show_collab_predictions": False,
}
#: the campaign's keys of a task, in its ``meta`` (hidden from the annotator)
TASK_KEYS = ("campaign", "item_id", "wording", "annotator", "position")


def labeling_config(labels: Sequence[str], *, title: str = "Rate as the instruction asks") -> str:
    """The labeling config XML: the rendered instruction as text, the scale's labels as one choice.

    >>> print(labeling_config(["yes", "no"]))  # doctest: +NORMALIZE_WHITESPACE
    <View>
      <Header value="Rate as the instruction asks"/>
      <Text name="instruction" value="$instruction"/>
      <Choices name="label" toName="instruction" choice="single" showInLine="true" required="true">
        <Choice value="yes"/>
        <Choice value="no"/>
      </Choices>
    </View>
    """
    choices = "\n".join(f"    <Choice value={quoteattr(str(lab))}/>" for lab in labels)
    return (
        "<View>\n"
        f"  <Header value={quoteattr(title)}/>\n"
        f'  <Text name="{TO_NAME}" value="$instruction"/>\n'
        f'  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single" showInLine="true" required="true">\n'
        f"{choices}\n"
        "  </Choices>\n"
        "</View>"
    )


def choice_result(label: str) -> list[dict[str, Any]]:
    """An annotation's ``result`` choosing ``label`` in the config of :func:`labeling_config` (what an
    annotator's click sends; :func:`promptlottery.human.ratings.read_label_studio` reads it back).

    >>> choice_result("4")
    [{'from_name': 'label', 'to_name': 'instruction', 'type': 'choices', 'value': {'choices': ['4']}}]
    """
    return [
        {"from_name": FROM_NAME, "to_name": TO_NAME, "type": "choices", "value": {"choices": [str(label)]}}
    ]


def tasks_for(
    assignment: pd.DataFrame, instructions: dict[tuple[str, str], str], campaign: str
) -> dict[str, list[dict]]:
    """``{annotator: [task, ...]}`` in queue order; a task is Label Studio's import format
    ``{"data": {"instruction": ...}, "meta": {campaign, item_id, wording, annotator, position}}``."""
    out: dict[str, list[dict]] = {}
    for a, g in assignment.sort_values(["annotator", "position"]).groupby("annotator", sort=True):
        out[str(a)] = [
            {
                "data": {"instruction": instructions[(str(r.item_id), str(r.wording))]},
                "meta": {
                    "campaign": campaign,
                    "item_id": str(r.item_id),
                    "wording": str(r.wording),
                    "annotator": str(a),
                    "position": int(r.position),
                },
            }
            for r in g.itertuples(index=False)
        ]
    return out


def write_import_files(
    tasks: dict[str, list[dict]], label_config: str, out_dir: str | Path
) -> dict[str, Path]:
    """``label_config.xml`` and ``tasks/<annotator>.json`` (one Label Studio import file per project)."""
    out_dir = Path(out_dir)
    (out_dir / "tasks").mkdir(parents=True, exist_ok=True)
    (out_dir / "label_config.xml").write_text(label_config + "\n", encoding="utf-8")
    paths = {}
    for a, ts in tasks.items():
        p = out_dir / "tasks" / f"{a}.json"
        p.write_text(json.dumps(ts, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths[a] = p
    return paths


class LabelStudioError(ConfigError):
    """Label Studio cannot be reached or refused a call (a user-facing one-line error; never the key)."""


class LabelStudioClient:
    """The few SDK calls a campaign needs (``label-studio-sdk`` 2.x)."""

    def __init__(self, url: str, *, api_key_env: str = "LABEL_STUDIO_API_KEY"):
        try:
            from label_studio_sdk import LabelStudio
        except ImportError:
            raise LabelStudioError(
                "human.label_studio_url is set but label-studio-sdk is not installed: "
                "pip install -e '.[human]' (or `make setup-labelstudio`)"
            ) from None
        key = os.environ.get(api_key_env)
        if not key:
            raise LabelStudioError(
                f"human.label_studio_url={url} needs the API key in the environment variable {api_key_env} (unset)"
            )
        self.url = url.rstrip("/")
        self.sdk = LabelStudio(base_url=self.url, api_key=key)

    def map_users(self, emails: dict[str, str]) -> dict[str, dict[str, Any]]:
        """One Label Studio user per annotator: the existing user with the annotator's email, else a new
        one (no password: the lab sets it, see docs/human_baseline.md); ``{annotator: {id, email, created}}``."""
        try:
            existing = {str(u.email).lower(): u for u in self.sdk.users.list()}
        except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; one line for all
            raise LabelStudioError(f"{self.url}: listing the users failed: {_short(exc)}") from None
        out: dict[str, dict[str, Any]] = {}
        for a, email in emails.items():
            u, created = existing.get(email.lower()), False
            if u is None:
                try:
                    u = self.sdk.users.create(username=email.split("@")[0], email=email, first_name=a)
                except Exception as exc:  # noqa: BLE001
                    raise LabelStudioError(
                        f"{self.url}: creating the user {email} of annotator {a} failed: {_short(exc)}"
                    ) from None
                created = True
            out[a] = {"id": int(u.id), "email": str(u.email), "created": created}
            logger.info("label studio user annotator=%s user=%s created=%s", a, u.id, created)
        ids = [v["id"] for v in out.values()]
        if len(set(ids)) != len(ids):
            raise LabelStudioError(f"{self.url}: two annotators map to one Label Studio user: {out}")
        return out

    def create_projects(
        self, tasks: dict[str, list[dict]], label_config: str, *, title: str
    ) -> dict[str, int]:
        """One project per annotator with its tasks (:data:`PROJECT_SETTINGS`); ``{annotator: project id}``."""
        ids = {}
        for a, ts in tasks.items():
            try:
                p = self.sdk.projects.create(
                    title=f"{title} / {a}"[:50],
                    description=f"promptlottery campaign {title}: the queue of annotator {a}",
                    label_config=label_config,
                    **PROJECT_SETTINGS,
                )
                self.sdk.projects.import_tasks(id=p.id, request=ts)
            except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; one line for all
                done = f"; projects created before it: {ids}" if ids else ""
                raise LabelStudioError(
                    f"{self.url}: creating the project of annotator {a} failed: {_short(exc)}{done}"
                ) from None
            ids[a] = int(p.id)
            logger.info("label studio project annotator=%s project=%s tasks=%d", a, p.id, len(ts))
        return ids

    def export(self, project_ids: dict[str, int], out_dir: str | Path) -> list[Path]:
        """Each project's JSON export as ``<out_dir>/export_<annotator>.json``."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for a, pid in project_ids.items():
            try:
                data = b"".join(self.sdk.projects.exports.download_sync(id=pid, export_type="JSON"))
            except Exception as exc:  # noqa: BLE001
                raise LabelStudioError(
                    f"{self.url}: exporting project {pid} (annotator {a}) failed: {_short(exc)}"
                ) from None
            p = out_dir / f"export_{a}.json"
            p.write_bytes(data)
            paths.append(p)
        return paths


def _short(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:300]


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
