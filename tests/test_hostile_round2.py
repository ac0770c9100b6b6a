"""Careless and hostile input, round two (issue 46): each item of the issue end to end, as the user met
it (a ``python -m run`` subprocess, the fake judge, a stub server on 127.0.0.1 only). Every test is a
row of the fault suite (``scripts/fault_suite.py``: ``ROUND_TWO`` names the row)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO
from tests.test_user_errors import SWEEP, TABLE, no_job_started, one_line, run, write, yaml_group

pytestmark = [pytest.mark.faults, pytest.mark.fault_subset]

PAIRS = [
    "dataset=table",
    "dataset.path=examples/own_judge/qa_pairs.jsonl",
    "dataset.fields.id=id",
    "dataset.fields.question=question",
    "dataset.fields.response_a=answer_a",
    "dataset.fields.response_b=answer_b",
    "dataset.fields.human=pref",
    "judge=own",
    "judge.mode=pairwise",
]
GROUP = "judge.group_file=examples/own_judge/correctness.yaml"


def judgments(tmp: Path) -> pd.DataFrame:
    files = sorted((tmp / "out").rglob("judgments.parquet"))
    assert files, "no judgments written"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


# ------------------------------------------------------------------- item 1: text verdicts


def test_a_prose_judge_gives_exactly_its_chosen_labels_pointwise(tmp_path):
    """The hash judge chooses a label per request; in prose (no logprobs: it restates the scale,
    echoes the task's last line, numbers its points, then answers) its parsed labels are exactly the
    labels it chose, which the same judge without prose gives as its argmax."""
    plain, prose = tmp_path / "plain", tmp_path / "prose"
    for where, extra in ((plain, []), (prose, ["backbone.backend.prose=true"])):
        proc = run(where, *TABLE, GROUP, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = judgments(plain).set_index("item_id"), judgments(prose).set_index("item_id")
    assert len(a) == len(b) == 24
    assert b["label_probs"].isna().all() and (b["scoring_mode"] == "parsed_label").all()
    assert b["parsed_label"].notna().all()
    assert (b.loc[a.index, "parsed_label"] == a["argmax_label"]).all()
    # the old reader took the restated scale's first number: every verdict read as 1
    assert b["raw_output"].str.contains("from 1 to 5").all() and set(a["argmax_label"]) != {"1"}


def test_a_prose_judge_gives_exactly_its_chosen_labels_pairwise(tmp_path):
    """The oracle in prose over the shipped pairs, both orders: each verdict, in the pair's terms,
    is the human preference (the restated format names [[A]], [[B]] and [[C]] first)."""
    proc = run(tmp_path, *PAIRS, "backbone.backend.behaviour=oracle", "backbone.backend.prose=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = judgments(tmp_path)
    assert len(df) == 48 and df["label_probs"].isna().all()
    assert (df["preferred_parsed"] == df["human_preferred"]).all()
    assert (df["preferred"] == df["human_preferred"]).all()


# ------------------------------------------------- item 2: everything checkable, before the first call

BAD_TEMPLATES = {
    "include": ("{% include 'other.j2' %} {{ response }}", "{% include %} reads another template"),
    "import": ("{% import 'm.j2' as m %}{{ response }}", "{% import %} reads another template"),
    "recursive_macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }} {{ response }}", "recursed without end"),
    "sandbox_range": ("{% for i in range(10**9) %}x{% endfor %}{{ response }}", "Range too big"),
    "nested_loops": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}{{ response }}",
        "it ran more than 3 s",
    ),
    "huge_output": ("{{ response * 100000000 }}", "'*' would make"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_TEMPLATES))
def test_a_template_that_cannot_render_stops_the_sweep_in_one_line_before_any_job(tmp_path, case):
    """P1 renders, P2 does not: one line naming the file and P2, and no job (P1 is not judged)."""
    template, why = BAD_TEMPLATES[case]
    g = yaml_group(tmp_path / "g.yaml", {"P1": "Rate {{ response }}.", "P2": template})
    proc = run(tmp_path, "-m", *TABLE, f"judge.group_file={g}", "judge.variant=P1,P2")
    one_line(proc, str(g), "variant P2", why)
    no_job_started(tmp_path)


def test_a_user_template_that_is_not_a_string_names_the_file_and_variant(tmp_path):
    raw = '  P1:\n    user: "Rate {{ response }}"\n  P2:\n    user:\n      - Rate\n      - "{{ response }}"\n'
    g = yaml_group(tmp_path / "g.yaml", {}, raw)
    proc = run(tmp_path, "-m", *TABLE, f"judge.group_file={g}", "judge.variant=P1,P2")
    one_line(proc, str(g), "variant P2", "`user:` must be a string", "got list")
    no_job_started(tmp_path)


def _read_only_dir(tmp_path: Path) -> Path:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounts a read-only tmpfs: needs root")
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    return ro


@pytest.mark.parametrize("where", ["link", "under_a_link", "tests", "conf", "read_only"])
def test_an_output_dir_that_is_a_link_in_the_source_tree_or_read_only_is_one_line(tmp_path, where):
    real = tmp_path / "real"
    real.mkdir()
    if where == "link":
        out = tmp_path / "outlink"
        out.symlink_to(real)
    elif where == "under_a_link":
        (tmp_path / "parent").symlink_to(real)
        out = tmp_path / "parent" / "out"
    elif where in ("tests", "conf"):
        out = REPO / where / f"planted_{os.getpid()}"
    else:
        out = _read_only_dir(tmp_path) / "out"
    try:
        proc = run(tmp_path, "-m", *TABLE, GROUP, "judge.variant=P1,P2", f"paths.output_dir={out}")
        expected = {"link": "is a symbolic link", "under_a_link": "is a symbolic link", "tests": "inside the source tree",
                    "conf": "inside the source tree", "read_only": "read-only file system"}[where]  # fmt: skip
        one_line(proc, "paths.output_dir", expected)
        assert not any(real.iterdir()) and not (where in ("tests", "conf") and out.exists())
    finally:
        if where == "read_only":
            subprocess.run(["umount", "-l", str(tmp_path / "ro")])


# ------------------------------------------------------ item 3: the analysis options of a sweep


@pytest.mark.parametrize(
    "option, expected",
    [("+analysis.n_resample=7", "unknown analysis option(s) ['n_resample']"),
     ("analysis.n_resamples=0", "analysis.n_resamples=0: must be an integer >= 1")],
)  # fmt: skip
def test_analysis_options_of_a_judging_sweep_are_checked_before_any_call(tmp_path, option, expected):
    proc = run(tmp_path, *SWEEP, GROUP, option)
    one_line(proc, expected)
    no_job_started(tmp_path)


# --------------------------------------------------------------- item 8: input text


def test_a_lone_surrogate_in_the_table_is_one_line_before_any_job(tmp_path):
    row = '{{"id": "{}", "question": "Capital of France?", "gold": "Paris", "answer": "{}", "rating": 3}}\n'
    table = write(tmp_path / "t.jsonl", row.format("a", "Paris") + row.format("b", "bad \\ud800 text"))
    args = [a for a in SWEEP if not a.startswith("dataset.path=")] + [f"dataset.path={table}", GROUP]
    proc = run(tmp_path, *args)
    one_line(proc, str(table), "item 'b' field response", "lone surrogate")
    no_job_started(tmp_path)


# --------------------------------------------------------------- item 9: three numeric defects


def test_numbers_alpha_of_the_unrounded_weighted_score_is_not_rounded_first():
    """Two judges, three items, continuous scores 1.004/1.0, 2.0/2.004, 3.0/3.0. By hand (interval
    alpha = 1 - (n - 1) sum_o / sum_e over the n = 6 pairable values): sum_o = 2 x 0.004^2 per
    disagreeing item = 6.4e-5; sum_e = 2 (n sum x^2 - (sum x)^2) = 2 (6 x 28.024032 - 12.008^2) =
    47.904256; alpha = 1 - 5 x 6.4e-5 / 47.904256. Rounded to 0.01 first, every item agrees: 1."""
    from promptlottery.analysis.lottery.agreement_measures import agreement_measures

    values = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    cont = np.array([[1.004, 1.0], [2.0, 2.004], [3.0, 3.0]])
    est = agreement_measures(values, [1, 2, 3, 4, 5], cont, n_resamples=20)["alpha_interval_cont"].estimate
    assert est == pytest.approx(1 - 5 * 6.4e-5 / 47.904256, abs=1e-12) and est < 1


def _games(k: int, kd: int, a_first: bool):
    """a and b each beat c k times and lose to d kd times; d beats c; a-b: one game each way, or
    (``a_first``) a wins both: a > b."""
    s1, s2, v = [], [], []
    for who in ("a", "b"):
        s1 += [who] * (k + kd)
        s2 += ["c"] * k + ["d"] * kd
        v += ["1"] * k + ["2"] * kd
    s1 += ["a", "b", "d"]
    s2 += ["b", "a", "c"]
    v += ["1", "2" if a_first else "1", "1"]
    return s1, s2, v


def test_numbers_bradley_terry_strengths_equal_to_solver_noise_tie_in_the_rank_statistics():
    """P1: a and b have the same record (scikit-learn's fit leaves them 1.5e-7 apart); P2: a > b.
    Both orders are d > {a, b} > c. By hand, over the 6 system pairs with a = b tied in P1: 5
    concordant, none discordant, tau-b = 5 / sqrt((6 - 1) x 6) = 0.9129; flip share 0; rank change
    share 1/4 (b: rank 2 in P1, 3 in P2). The sparse estimator's fit ties a and b too."""
    from promptlottery.metrics.preference_ranks import bradley_terry, rank_flips
    from promptlottery.metrics.sparse_bt import fit_weighted_bt

    names = ["a", "b", "c", "d"]
    p1 = bradley_terry(*_games(4, 1, a_first=False)).reindex(names)
    p2 = bradley_terry(*_games(4, 1, a_first=True)).reindex(names)
    assert p1["a"] == p1["b"] and p2["a"] > p2["b"]
    got = rank_flips(np.column_stack([p1.to_numpy(), p2.to_numpy()]))
    assert got["kendall_tau"] == pytest.approx(5 / np.sqrt(30), abs=1e-12)
    assert got["flip_share"] == 0 and got["rank_change_share"] == pytest.approx(0.25)
    wins = np.zeros((1, 4, 4))
    for x, y, v in zip(*_games(4, 1, a_first=False), strict=True):
        i, j = names.index(x), names.index(y)
        wins[0, i, j] += v == "1"
        wins[0, j, i] += v == "2"
    sparse = fit_weighted_bt(wins)[0]
    assert sparse[0] == sparse[1] and list(np.argsort(sparse)) == list(np.argsort(p1.to_numpy()))


def test_numbers_a_grid_constant_within_each_wording_is_collapsed():
    """Three wordings, four items: P1 says 5 to every item, P2 4, P3 3. No label has 95% of the
    verdicts (a third each), yet nothing is measured: the grid is collapsed, and kappa is n/a."""
    from promptlottery.analysis.lottery.agreement_measures import agreement_measures
    from promptlottery.analysis.lottery.labels import collapse_reason

    labels = ["5"] * 4 + ["4"] * 4 + ["3"] * 4
    judges = ["P1"] * 4 + ["P2"] * 4 + ["P3"] * 4
    why = collapse_reason(labels, 0.95, by=judges)
    assert why and "collapsed within each judge" in why and "P1 '5', P2 '4', P3 '3'" in why
    assert collapse_reason(labels, 0.95) is None  # the old check alone: not collapsed
    values = np.tile([5.0, 4.0, 3.0], (4, 1))
    out = agreement_measures(values, [1, 2, 3, 4, 5], n_resamples=20)
    assert (
        np.isnan(out["fleiss_kappa"].estimate) and "collapsed within each judge" in out["fleiss_kappa"].note
    )


# ------------------------------------------- item 4: one analysis over several runs keys what was judged


def _sweep_into(tmp: Path, name: str, *args: str) -> Path:
    proc = run(tmp, "-m", *TABLE, "judge.variant=P1,P2", f"hydra.sweep.dir={tmp / name}", *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp / name


@pytest.mark.parametrize("differs", ["table_same_ids", "table_other_ids", "wording_text"])
def test_several_runs_that_judged_different_tables_or_texts_are_refused_naming_them(tmp_path, differs):
    rows = (REPO / "examples" / "own_judge" / "qa_answers.jsonl").read_text().splitlines()
    g = yaml_group(
        tmp_path / "g.yaml", {"P1": "Rate {{ response }} for {{ context }}.", "P2": "Score {{ response }}."}
    )
    a = _sweep_into(tmp_path, "a", f"judge.group_file={g}")
    if differs == "wording_text":  # P2 edited, its version not bumped
        g = yaml_group(
            tmp_path / "g.yaml",
            {"P1": "Rate {{ response }} for {{ context }}.", "P2": "Grade {{ response }}."},
        )
        b = _sweep_into(tmp_path, "b", f"judge.group_file={g}")
    else:
        other = [r.replace('"answer": "', '"answer": "Surely ') for r in rows]
        if differs == "table_other_ids":
            other = [r.replace('"id": "', '"id": "x-') for r in other]
        table = write(tmp_path / "other.jsonl", "\n".join(other) + "\n")
        b = _sweep_into(tmp_path, "b", f"judge.group_file={g}", f"dataset.path={table}")
    proc = run(tmp_path, "+analysis=lottery", f"analysis.runs=[{a},{b}]", "analysis.plots=false",
               "analysis.embeddings=none", "analysis.n_resamples=20", "analysis.n_permutations=5")  # fmt: skip
    what = (
        "two different tables for dataset table" if differs != "wording_text" else "two texts of wording P2"
    )
    one_line(proc, what, "a/", "b/")
    assert not list((tmp_path / "out").rglob("report.md"))


# ------------------------------------------- item 6: server answers validated at the boundary (127.0.0.1)

from tests.openai_stub import DEFAULT_TOP  # noqa: E402
from tests.openai_stub import top_logprobs as _top  # noqa: E402
from tests.test_backends_openai import _reqs  # noqa: E402


@pytest.fixture
def stub(openai_stub):
    """The scripted OpenAI-compatible stub (tests/openai_stub.py), on 127.0.0.1."""
    return openai_stub


def _answer(content="4", logprob=-0.7, top=None, usage=None):
    top = _top(DEFAULT_TOP) if top is None else top
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
              "logprobs": {"content": [{"token": "4", "logprob": logprob, "top_logprobs": top}]}}  # fmt: skip
    return {"id": "x", "choices": [choice], "usage": usage or {"prompt_tokens": 42, "completion_tokens": 1}}


MALFORMED = {
    "nan_logprob": json.dumps(_answer(logprob=float("nan"))),  # NaN: JSON as servers send it
    "inf_top_logprob": json.dumps(_answer(top=[{"token": "4", "logprob": float("inf")}])),
    "positive_logprob": json.dumps(_answer(top=[{"token": "4", "logprob": 5.0}, {"token": "5", "logprob": 5.1}])),
    "string_logprob": json.dumps(_answer(top=[{"token": "4", "logprob": "-0.1"}])),
    "string_count": json.dumps(_answer(usage={"prompt_tokens": "many", "completion_tokens": 1})),
}  # fmt: skip


def _backend(url, **kw):
    from promptlottery.backends.openai_compat import VLLMServerBackend

    return VLLMServerBackend("judge-model", base_url=url, **{"api_key_env": "", **kw})


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_server_answers_malformed_logprobs_or_counts_fail_the_call_and_are_never_stored(tmp_path, stub, case):
    """Every answer malformed: retried, then the batch fails in one line naming the field; the cache
    holds nothing. A malformed answer followed by a good one: the good one is stored."""
    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, JudgingError, run_calls

    cache = CallCache(tmp_path / "calls.sqlite")
    stub.script = [(200, MALFORMED[case], {})] * 3
    with pytest.raises(JudgingError, match="malformed answer") as err:
        run_calls(
            _reqs(1), _backend(stub.url), cache, Decoding(), stats=CallStats(), max_retries=2, backoff_s=0.01
        )
    assert "\n" not in str(err.value) and len(stub.seen) == 3 and len(cache) == 0
    stub.script = [(200, MALFORMED[case], {})]  # then the default, well-formed answer
    got = run_calls(
        _reqs(1), _backend(stub.url), cache, Decoding(), stats=CallStats(), max_retries=2, backoff_s=0.01
    )
    probs = got["key0000"].label_probs
    assert len(cache) == 1 and probs["4"] == pytest.approx(0.6) and sum(probs.values()) <= 1


def test_server_answers_have_one_deadline_per_request_not_per_read():
    """A server that sends its answer one byte every 0.1 s (about 20 s in all) holds a call with
    timeout_s=1 for about 1 s, not for the whole drip."""
    from promptlottery.backends.base import BackendError, Decoding

    body = json.dumps(_answer()).encode()

    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for k in range(len(body)):
                    self.wfile.write(body[k : k + 1])
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass  # the client gave up

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(BackendError, match="no complete answer within 1 s"):
            _backend(f"http://127.0.0.1:{server.server_address[1]}/v1", timeout_s=1.0).generate(
                _reqs(1), Decoding()
            )
        assert time.perf_counter() - t0 < 4
    finally:
        server.shutdown()
        server.server_close()


def test_server_answers_echoing_the_key_are_stored_without_it(tmp_path, stub, monkeypatch):
    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, run_calls

    key = "sk-echo-" + "Zq9f3x7TOPSECRET"  # pragma: allowlist secret
    monkeypatch.setenv("JUDGE_KEY_R2", key)
    stub.script = [(200, _answer(content=f"4 (you sent Bearer {key})"), {})]
    cache = CallCache(tmp_path / "calls.sqlite")
    got = run_calls(
        _reqs(1), _backend(stub.url, api_key_env="JUDGE_KEY_R2"), cache, Decoding(), stats=CallStats()
    )
    assert (
        got["key0000"].raw_text.startswith("4 (you sent Bearer ***)") and key not in got["key0000"].raw_text
    )
    assert stub.seen[0]["headers"]["Authorization"] == f"Bearer {key}"
    cache.close()
    assert key.encode() not in (tmp_path / "calls.sqlite").read_bytes()


# ------------------------------------------------- item 5: no file opened through a link; foreign SQLite


def test_links_a_planted_lottery_link_in_a_sweep_dir_leaves_its_target_untouched(tmp_path):
    """<sweep>/lottery planted as a link to another study's analysis dir: the sweep's analysis
    refuses it (logged), and the other study's report.md is as it was."""
    victim = tmp_path / "other_study"
    victim.mkdir()
    (victim / "report.md").write_text("precious\n")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "lottery").symlink_to(victim)
    proc = run(tmp_path, "-m", *TABLE, GROUP, "judge.variant=P1,P2", "+analysis=lottery_after_sweep",
               f"hydra.sweep.dir={sweep}", "analysis.plots=false", "analysis.embeddings=none")  # fmt: skip
    assert "is a symbolic link" in proc.stdout + proc.stderr
    assert sorted(p.name for p in victim.iterdir()) == ["report.md"]
    assert (victim / "report.md").read_text() == "precious\n"


def _foreign_db(path: Path) -> bytes:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'ada')")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("how", ["link", "copy"])
def test_links_a_cache_that_is_a_link_or_another_programs_sqlite_is_refused_and_left_as_it_was(tmp_path, how):
    other = tmp_path / "other.db"
    before = _foreign_db(other)
    cache = tmp_path / "cache"
    cache.mkdir()
    if how == "link":
        (cache / "calls.sqlite").symlink_to(other)
    else:
        shutil.copy(other, cache / "calls.sqlite")
    proc = run(tmp_path, *TABLE, GROUP)
    one_line(proc, str(cache / "calls.sqlite"), "symbolic link" if how == "link" else "another program")
    held = other if how == "link" else cache / "calls.sqlite"
    assert held.read_bytes() == before and not list(tmp_path.rglob("*.sqlite-wal"))
    assert not list((tmp_path / "out").rglob("judgments.parquet")) if (tmp_path / "out").exists() else True


# ------------------------------------------------- item 7: a locked cache, a full disk


def _requests(n: int):
    from promptlottery.backends.base import Decoding
    from promptlottery.backends.fake import FakeBackend
    from promptlottery.calls.cache import make_request

    fake = FakeBackend(max_concurrency=4)
    reqs = [make_request("judge", fake.identity(), Decoding(), messages=[{"role": "user", "content": f"rate {i}"}],
                         labels=("1", "2", "3")) for i in range(n)]  # fmt: skip
    return fake, reqs


def test_disk_a_locked_cache_is_one_line_and_the_answers_received_are_not_paid_twice(tmp_path):
    import sqlite3

    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import CacheError, CallCache
    from promptlottery.calls.loop import CallStats, run_calls

    path = tmp_path / "calls.sqlite"
    cache = CallCache(path, timeout_s=0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    fake, reqs = _requests(8)
    with pytest.raises(CacheError) as err:
        run_calls(reqs, fake, cache, Decoding(), stats=CallStats())
    msg = str(err.value)
    assert "\n" not in msg and "is locked" in msg and "do not move it away" in msg and "kept in" in msg
    assert fake.calls == 4  # the first batch was answered, then could not be stored
    holder.execute("ROLLBACK")
    holder.close()
    cache.close()
    again = CallCache(path, timeout_s=0.3)  # stores the kept batch first
    assert len(again) == 4
    fake2, _ = _requests(0)
    run_calls(reqs, fake2, again, Decoding(), stats=CallStats())
    assert fake2.calls == 4 and len(again) == 8  # only the batch never answered is asked


def test_disk_a_cache_locked_past_its_timeout_at_open_says_so_in_one_line(tmp_path):
    import sqlite3

    cache = tmp_path / "cache"
    cache.mkdir()
    con = sqlite3.connect(cache / "calls.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, response TEXT NOT NULL, request TEXT, "
                "created REAL NOT NULL, response_sha256 TEXT)")  # fmt: skip
    con.execute("BEGIN IMMEDIATE")
    try:
        proc = run(tmp_path, *TABLE, GROUP, "paths.cache_timeout_s=0.5")
    finally:
        con.execute("ROLLBACK")
        con.close()
    one_line(proc, "is locked", "do not move it away")
    assert "not a usable SQLite database" not in proc.stderr


def _small_disk(tmp_path: Path, size: str) -> Path:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounts a small tmpfs: needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    return disk


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_disk_a_full_disk_under_the_cache_is_one_line_and_the_answers_received_are_not_paid_twice(tmp_path):
    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import CacheError, CallCache
    from promptlottery.calls.loop import CallStats, run_calls

    disk = _small_disk(tmp_path, "1m")
    try:
        cache = CallCache(disk / "calls.sqlite", timeout_s=0.3)
        filler = _fill(disk)
        fake, reqs = _requests(8)
        with pytest.raises(CacheError) as err:
            run_calls(reqs, fake, cache, Decoding(), stats=CallStats())
        msg = str(err.value)
        assert "\n" not in msg and "full" in msg and "kept in" in msg, msg
        filler.unlink()
        cache.close()
        again = CallCache(disk / "calls.sqlite")
        fake2, _ = _requests(0)
        run_calls(reqs, fake2, again, Decoding(), stats=CallStats())
        assert fake.calls + fake2.calls == 8 and len(again) == 8  # each answer paid once
        again.close()
    finally:
        subprocess.run(["umount", "-l", str(disk)])


def test_disk_a_full_disk_in_a_re_analysis_is_one_line_and_leaves_no_debris(tmp_path):
    disk = _small_disk(tmp_path, "8m")
    try:
        sweep = tmp_path / "sweep"
        assert (
            run(tmp_path, "-m", *TABLE, GROUP, "judge.variant=P1,P2", f"hydra.sweep.dir={sweep}").returncode
            == 0
        )
        out = disk / "lottery"
        args = ["+analysis=lottery", f"analysis.runs={sweep}", "analysis.plots=false", "analysis.embeddings=none",
                "analysis.n_resamples=20", "analysis.n_permutations=5", f"hydra.run.dir={out}"]  # fmt: skip
        first = run(tmp_path, *args)
        assert first.returncode == 0, first.stderr[-2000:]
        report = (out / "report.md").read_bytes()
        _fill(disk)
        proc = run(tmp_path, *args)
        one_line(proc, "could not be written", "free space")
        assert not (out / ".staging").exists() and (out / "report.md").read_bytes() == report
    finally:
        subprocess.run(["umount", "-l", str(disk)])
