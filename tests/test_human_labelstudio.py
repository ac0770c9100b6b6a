"""A real Label Studio server on 127.0.0.1 (started and stopped here, its own SQLite data dir):
the campaign creates (or maps) one user per annotator and one blind project each; each simulated
annotator logs in as their own user and labels through the queue the server serves (the next-task
API, as the "Label all tasks" button does), one through a Data Manager tab they re-sorted, one who
skips a task and walks away; one command exports every project; the import's checks (who, in what
order, how much of the plan) and the figures equal the ones computed by hand (tests/human_hand.py)
from what the server served; a rating posted in another annotator's project is refused.

Run with `make test-human` (the server from .venv-labelstudio, the SDK in .venv-human; `make
setup-labelstudio` builds both). The server's first start migrates its database: minutes.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, compose
from tests.human_hand import across_units, four

pytestmark = pytest.mark.human

LS_BIN = Path(os.environ.get("LABEL_STUDIO_BIN", REPO / ".venv-labelstudio" / "bin" / "label-studio"))
TABLE = REPO / "examples" / "own_judge" / "qa_answers.jsonl"
GROUP = REPO / "examples" / "own_judge" / "correctness.yaml"
DATA = [
    "dataset=table",
    f"dataset.path={TABLE}",
    "dataset.fields.id=id",
    "dataset.fields.response=answer",
    "dataset.fields.context=question",
    "dataset.fields.reference=gold",
    "dataset.fields.system=system",
    "dataset.fields.human=rating",
    "dataset.limit=8",
    "judge=own",
    f"judge.group_file={GROUP}",
]
WORDINGS = ["P1", "P2", "P3"]
LABELS = ("1", "2", "3", "4", "5")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    if not LS_BIN.exists():
        pytest.skip(f"no Label Studio server at {LS_BIN} (make setup-labelstudio)")
    pytest.importorskip("label_studio_sdk")
    home = tmp_path_factory.mktemp("label_studio")
    port, token = _free_port(), secrets.token_hex(20)
    data_dir = home / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    # a legacy token given on the command line (a personal access token works the same through the SDK)
    env.update(LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN="true", HOME=str(home))
    log = open(home / "server.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(LS_BIN),
            "start",
            "--no-browser",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--username",
            "admin@example.com",
            "--password",
            secrets.token_hex(8),
            "--user-token",
            token,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.perf_counter() - t0 > 1200:
                raise RuntimeError(f"Label Studio did not start: {(home / 'server.log').read_text()[-2000:]}")
            time.sleep(3)
        print(f"label studio up in {time.perf_counter() - t0:.0f} s at {url}")
        yield url, token, lambda email, pw: _set_password(env, data_dir, email, pw)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started, only those
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _set_password(env: dict, data_dir: Path, email: str, password: str) -> None:
    """The documented hand-out step: `label-studio reset_password` on the server's data dir."""
    subprocess.run(
        [
            str(LS_BIN),
            "reset_password",
            "--data-dir",
            str(data_dir),
            "--username",
            email,
            "--password",
            password,
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


class Annotator:
    """One person in a browser: a session logged in with their email and password (Django's login form),
    then the same API calls the labelling screen makes."""

    def __init__(self, url: str, email: str, password: str):
        self.url, self.jar = url, http.cookiejar.CookieJar()
        self.http = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.http.open(f"{url}/user/login/").read()
        form = {"email": email, "password": password, "csrfmiddlewaretoken": self._csrf()}
        r = self.http.open(
            urllib.request.Request(
                f"{url}/user/login/", data=urllib.parse.urlencode(form).encode(), headers={"Referer": url}
            )
        )
        assert "/user/login" not in r.geturl(), f"login of {email} failed"

    def _csrf(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken")

    def call(self, path: str, body: dict | None = None):
        headers = {"Content-Type": "application/json", "X-CSRFToken": self._csrf(), "Referer": self.url}
        data = None if body is None else json.dumps(body).encode()
        try:
            with self.http.open(urllib.request.Request(f"{self.url}{path}", data=data, headers=headers)) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def next_task(self, project: int, view: int | None = None) -> dict | None:
        """The task the labelling queue serves next (None: the queue is empty)."""
        return self.call(f"/api/projects/{project}/next" + (f"?view={view}" if view else ""))

    def label(self, task: dict, label: str | None) -> dict:
        """Submit (or, with None, skip: a cancelled annotation, what the skip button would send)."""
        from promptlottery.human.labelstudio import choice_result

        body = {"result": choice_result(label) if label else [], "lead_time": 1.0, "project": task["project"]}
        if label is None:
            body["was_cancelled"] = True
        return self.call(f"/api/tasks/{task['id']}/annotations/", body)


def truth() -> dict[str, str]:
    rows = [json.loads(line) for line in TABLE.read_text().splitlines() if line.strip()]
    return {r["id"]: str(r["rating"]) for r in rows}


def simulated_label(item: str, wording: str, annotator: str, t: dict[str, str]) -> str:
    """The truth, except: a01 and a02 read P2 as a harsher rule (2 points lower, floor 1); a03 says 4
    for a 3 under P1."""
    y = int(t[item])
    if wording == "P2" and annotator in ("a01", "a02"):
        y = max(1, y - 2)
    if wording == "P1" and annotator == "a03" and y == 3:
        y = 4
    return str(y)


def test_campaign_queue_export_import_analyse(label_studio, tmp_path, monkeypatch):
    from label_studio_sdk import LabelStudio

    from promptlottery.human.ratings import RatingsError
    from promptlottery.stages import run_stage

    url, token, set_password = label_studio
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", token)
    sdk = LabelStudio(base_url=url, api_key=token)
    t0 = time.perf_counter()
    # a01 already has an account (mapped by email); the campaign creates the other five
    sdk.users.create(username="a01", email="a01@example.org")
    cfg = compose(
        [
            "+human=campaign",
            *DATA,
            "human.annotators=6",
            f"human.wordings=[{','.join(WORDINGS)}]",
            f"human.label_studio_url={url}",
        ],
        tmp_path=tmp_path,
    )
    camp_dir = tmp_path / "campaign"
    rec = run_stage(cfg, camp_dir)
    camp = json.loads((camp_dir / "campaign.json").read_text())
    projects, users = camp["label_studio_projects"], camp["label_studio_users"]
    assert rec["n_tasks"] == 8 * 3 * 3 and sorted(projects) == [f"a0{n}" for n in range(1, 7)]
    assert [users[a]["created"] for a in sorted(users)] == [False, True, True, True, True, True]
    assert (
        len({u["id"] for u in users.values()}) == 6 and token not in (camp_dir / "results.json").read_text()
    )
    for pid in projects.values():  # blind, no skip button
        p = sdk.projects.get(id=pid)
        assert p.show_skip_button is False and p.sampling == "Sequential sampling"
    # hand out the logins: each annotator labels through their own queue, as served
    t = truth()
    assignment = pd.read_csv(camp_dir / "assignment.csv", dtype=str)
    posted: dict[tuple[str, str], dict[str, str]] = {}
    served: dict[str, list[dict]] = {}
    for a, pid in projects.items():
        pw = secrets.token_hex(8)
        set_password(users[a]["email"], pw)
        person = Annotator(url, users[a]["email"], pw)
        view = None
        if (
            a == "a05"
        ):  # re-sorts the Data Manager by the instruction text, then "Label all tasks" in that tab
            v = person.call(
                "/api/dm/views/", {"project": pid, "data": {"ordering": ["tasks:data.instruction"]}}
            )
            view = v["id"]
        served[a] = []
        skipped = None
        while (task := person.next_task(pid, view)) is not None:
            assert set(task["data"]) == {"instruction"}  # blind: no item, wording or position shown
            m = task["meta"]
            if task["id"] == skipped:
                break  # a06: the skipped task comes back; they walk away
            served[a].append(m)
            if a == "a06" and len(served[a]) == 2:
                person.label(task, None)
                skipped = task["id"]
                continue
            lab = simulated_label(m["item_id"], m["wording"], a, t)
            person.label(task, lab)
            posted.setdefault((m["item_id"], m["wording"]), {})[a] = lab
        mine = assignment[assignment["annotator"] == a]
        if a not in ("a05", "a06"):  # the plain queue serves the campaign's order
            assert [(m["item_id"], m["wording"]) for m in served[a]] == list(
                zip(mine["item_id"], mine["wording"])
            )
    # export every project in one command, import
    run_stage(
        compose(["+human=export", f"human.campaign={camp_dir}"], tmp_path=tmp_path), tmp_path / "export"
    )
    assert len(list((tmp_path / "export").glob("export_*.json"))) == 6
    imp_cfg = compose(
        ["+human=import", f"human.campaign={camp_dir}", f"human.export={tmp_path}/export/export_*.json"],
        tmp_path=tmp_path,
    )
    rec = run_stage(imp_cfg, tmp_path / "import")
    checks = rec["checks"]
    # by hand, from what the server served: a05's consecutive same-item tasks and places off the plan
    items5 = [m["item_id"] for m in served["a05"]]
    pos5 = [m["position"] for m in served["a05"]]
    b2b = sum(x == y for x, y in zip(items5, items5[1:]))
    off = sum(p != q for p, q in zip(pos5, sorted(pos5)))
    assert checks["attribution"].startswith("every annotation completed by its annotator's")
    assert checks["back_to_back"] == b2b and checks["annotators_back_to_back"] == (["a05"] if b2b else [])
    assert off > 0 and checks["annotators_out_of_plan"] == ["a05"]
    n_rated = sum(len(c) for c in posted.values())
    short = 24 - sum(len(c) == 3 for c in posted.values())
    assert checks["coverage"] == {
        "planned": 72,
        "rated": n_rated,
        "skipped": 1,
        "not_done": 72 - n_rated - 1,
        "annotators_missing": [],
        "cells": 24,
        "cells_short": short,
    }
    assert n_rated < 72 and short >= 1  # the skipped cell is short of a rater
    ratings = pd.read_parquet(tmp_path / "import" / "human_ratings.parquet")
    got = {(r.item_id, r.wording, r.annotator): r.label for r in ratings.itertuples()}
    assert got == {(i, w, a): lab for (i, w), c in posted.items() for a, lab in c.items()}
    # the judge: the fake backend, P1 three times, P2 and P3 once, at T=0.7
    runs = tmp_path / "judge"
    for v in WORDINGS:
        n = 3 if v == "P1" else 1
        jc = compose(
            [*DATA, "backbone=fake", f"judge.variant={v}", f"n_samples={n}", "decoding.temperature=0.7"],
            tmp_path=tmp_path,
        )
        run_stage(jc, runs / v)
    # analyse
    out = tmp_path / "analyse"
    rec = run_stage(
        compose(
            [
                "+human=analyse",
                f"human.ratings={tmp_path}/import/human_ratings.parquet",
                f"human.runs={runs}/*",
                "human.n_resamples=200",
            ],
            tmp_path=tmp_path,
        ),
        out,
    )
    agree = pd.read_csv(out / "tables" / "human_agreement.csv")
    deg = pd.read_csv(out / "tables" / "human_degradation.csv").set_index("measure")
    # the same figures by hand, from what the annotators posted and the judge answered
    # Fleiss on complete units: within, each cell's first m ratings in annotator order (m = the fewest a
    # rated cell has: the skipped cell has 2); across, the units with every wording
    cells = list(posted.values())
    m = min(len(c) for c in cells if len(c) >= 2)
    across = across_units(posted, WORDINGS)
    hand = {
        ("human", "within"): four(cells, LABELS, [dict(sorted(c.items())[:m]) for c in cells if len(c) >= 2]),
        ("human", "across"): four(across, LABELS, [u for u in across if len(u) == len(WORDINGS)]),
    }
    j = pd.concat([pd.read_parquet(p) for p in runs.glob("*/judgments.parquet")])
    p1 = j[j["variant"] == "P1"]
    hand[("judge", "within")] = four(
        [dict(zip(g["sample_index"], g["argmax_label"])) for _, g in p1.groupby("item_id")], LABELS
    )
    s0 = j[j["sample_index"] == 0]
    hand[("judge", "across")] = four(
        [dict(zip(g["variant"], g["argmax_label"])) for _, g in s0.groupby("item_id")], LABELS
    )
    for (side, setting), want in hand.items():
        row = agree[(agree["side"] == side) & (agree["setting"] == setting)].iloc[0]
        for m, v in want.items():
            assert row[m] == pytest.approx(v, abs=1e-4), (side, setting, m)  # the CSV's 4 decimals
    for m in ("overlap", "cohen", "fleiss", "alpha"):
        h_drop = hand[("human", "within")][m] - hand[("human", "across")][m]
        j_drop = hand[("judge", "within")][m] - hand[("judge", "across")][m]
        assert h_drop > 0, m  # the P2 rule makes the humans disagree across wordings
        ratio = j_drop / h_drop
        assert rec["metrics"][f"human/{agree['config_id'].iloc[0]}/{m}/ratio"] == pytest.approx(
            ratio, abs=1e-9
        )
        assert deg.loc[m, "ratio"] == pytest.approx(ratio, abs=1e-4)
        assert deg.loc[m, "drop_difference"] == pytest.approx(j_drop - h_drop, abs=1e-4)
    report = (out / "human_report.md").read_text()
    assert "ratio judge/human (ours)" in report and "6-9x" in report
    # a04 labels a task in a03's project (every member sees every project): the export is refused
    pw = secrets.token_hex(8)
    set_password(users["a04"]["email"], pw)
    intruder = Annotator(url, users["a04"]["email"], pw)
    task3 = next(iter(sdk.tasks.list(project=projects["a03"])))
    intruder.label({"id": task3.id, "project": projects["a03"]}, "3")
    run_stage(
        compose(["+human=export", f"human.campaign={camp_dir}"], tmp_path=tmp_path), tmp_path / "export2"
    )
    with pytest.raises(
        RatingsError,
        match=r"export_a03.json task \d+ annotation \d+: completed by Label Studio "
        rf"user {users['a04']['id']} \(annotator a04's user\), not by a03's user",
    ):
        from promptlottery.stages.human import HumanOptions
        from promptlottery.stages.human_import import import_checked

        import_checked(HumanOptions(campaign=str(camp_dir), export=f"{tmp_path}/export2/export_*.json"))
    print(
        f"campaign -> analysis in {time.perf_counter() - t0:.1f} s; a05 back-to-back {b2b}, out of plan {off}; "
        f"coverage {checks['coverage']}; ratios "
        + ", ".join(f"{m} {deg.loc[m, 'ratio']:.3f}" for m in deg.index)
    )
