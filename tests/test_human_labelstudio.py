"""A real Label Studio server on 127.0.0.1 (started and stopped here, its own SQLite data dir):
campaign through the SDK, simulated annotators posting through the API, export, import, analyse;
the figures equal the ones computed by hand (tests/human_hand.py) from the simulated annotations.

Run with `make test-human` (the server from .venv-labelstudio, the SDK in .venv-human; `make
setup-labelstudio` builds both). The server's first start migrates its database: minutes.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
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
            str(home / "data"),
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
        yield url, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started, only those
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


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


def test_campaign_annotate_export_import_analyse(label_studio, tmp_path, monkeypatch):
    from label_studio_sdk import LabelStudio

    from promptlottery.human.labelstudio import LabelStudioClient, choice_result
    from promptlottery.stages import run_stage

    url, token = label_studio
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", token)
    t0 = time.perf_counter()
    # 1. the campaign, its projects created through the SDK
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
    projects = camp["label_studio_projects"]
    assert rec["n_tasks"] == 8 * 3 * 3 and sorted(projects) == [f"a0{n}" for n in range(1, 7)]
    assert token not in (camp_dir / "results.json").read_text()
    # 2. simulated annotators post through the API, each as their own Label Studio user
    sdk = LabelStudio(base_url=url, api_key=token)
    t = truth()
    posted: dict[tuple[str, str], dict[str, str]] = {}
    assignment = pd.read_csv(camp_dir / "assignment.csv", dtype=str)
    for a, pid in projects.items():
        user = sdk.users.create(username=a, email=f"{a}@example.com", password=secrets.token_hex(8))
        tasks = sorted(sdk.tasks.list(project=pid), key=lambda x: x.data["position"])
        mine = assignment[assignment["annotator"] == a]
        assert [(x.data["item_id"], x.data["wording"]) for x in tasks] == list(
            zip(mine["item_id"], mine["wording"])
        )
        for x in tasks:
            lab = simulated_label(x.data["item_id"], x.data["wording"], a, t)
            sdk.annotations.create(
                id=x.id,
                completed_by=user.id,
                lead_time=1.0,
                result=choice_result(lab),
            )
            posted.setdefault((x.data["item_id"], x.data["wording"]), {})[a] = lab
    # 3. export, 4. import
    exports = LabelStudioClient(url).export(projects, tmp_path / "export")
    assert len(exports) == 6
    run_stage(
        compose(
            ["+human=import", f"human.campaign={camp_dir}", f"human.export={tmp_path}/export/*.json"],
            tmp_path=tmp_path,
        ),
        tmp_path / "import",
    )
    ratings = pd.read_parquet(tmp_path / "import" / "human_ratings.parquet")
    assert len(ratings) == 72
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
    # 5. analyse
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
    # the same figures by hand, from what the simulated annotators posted and the judge answered
    hand = {
        ("human", "within"): four(list(posted.values()), LABELS),
        ("human", "across"): four(across_units(posted, WORDINGS), LABELS),
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
        assert deg.loc[m, "ratio"] == pytest.approx(ratio, abs=1e-4) and abs(ratio - 1) > 0.05
    report = (out / "human_report.md").read_text()
    assert "ratio judge/human (ours)" in report and "6-9x" in report
    print(
        f"campaign -> analysis in {time.perf_counter() - t0:.1f} s; ratios "
        + ", ".join(f"{m} {deg.loc[m, 'ratio']:.3f}" for m in deg.index)
    )
