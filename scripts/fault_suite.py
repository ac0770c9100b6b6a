"""The fault suite (``make test-faults``): run it, time it, print the table "fault | runs | held".

    .venv/bin/python scripts/fault_suite.py [pytest args...]

Runs the tests marked ``faults`` (tests/test_faults.py: SIGKILL, a damaged cache, a full disk, two
writers; tests/test_user_errors.py: the hostile inputs; tests/test_hostile_round2.py: issue 46's
items 1-9, a row each) and tabulates pytest's own results by fault:
``runs`` the cases run, ``held`` the cases whose guarantee held (passed). A case marked xfail(strict) is
a guarantee that does not hold yet (counted under ``not yet``); a skipped case (a full disk needs
root) under ``skipped``. Exit status: pytest's.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/test_faults.py",
    "tests/test_user_errors.py",
    "tests/test_spend_faults.py",
    "tests/test_call_window.py",
    "tests/test_provider_batches.py",
    "tests/test_hostile_round2.py",
]
#: test function -> the fault it plants (tests not named here are the hostile inputs of the second file)
FAULTS = {
    "test_sigkill_mid_sweep_then_rerun_makes_exactly_the_missing_calls": "SIGKILL in a sweep (seeded call count)",
    "test_sigkill_in_the_lottery_analysis_then_rerun_makes_no_call": "SIGKILL in the lottery analysis (seeded delay)",
    "test_flipped_digits_in_a_cached_value_are_one_line_naming_the_key": "cache: digits flipped in a value",
    "test_an_emptied_or_renamed_cache_says_how_many_calls_are_paid_again": "cache: 0 bytes or renamed",
    "test_a_full_disk_leaves_no_half_file_and_a_rerun_completes": "full disk (2 MB tmpfs)",
    "test_two_sweeps_on_one_cache_end_as_a_clean_run": "two sweeps writing one cache",
    "test_a_spend_cap_reached_mid_sweep_keeps_every_answer_and_a_raised_cap_resumes": "spend cap reached mid-sweep",
    "test_sigkill_mid_window_then_resume_sends_exactly_the_missing_calls": "SIGKILL mid-window (HTTP server stub)",
    "test_a_run_killed_mid_batch_resumes_polling_it_and_submits_nothing_twice": "SIGKILL mid-batch (batch API stub)",
    "test_an_expired_batch_sends_its_unanswered_requests_again": "a provider batch that expires",
    "test_a_run_killed_between_submit_and_journal_submits_nothing_new_on_restart": "SIGKILL between a batch's submit and its journal entry (OpenAI, Anthropic stubs)",
    "test_a_cap_the_next_batch_file_would_cross_stops_before_submitting_it_and_keeps_every_answer": "spend cap reached mid-batch (batch API stub)",
}
HOSTILE = "hostile input (one line, rc 2, or warned)"
#: issue 46's items (tests/test_hostile_round2.py): the test function's name starts with its key
ROUND_TWO = {
    "test_a_prose_judge": "1. text verdicts read at the verdict (prose judge, end to end)",
    "test_a_template_that_cannot_render": "2. a template that cannot render: one line, no job",
    "test_a_user_template_that_is_not_a_string": "2. a template that cannot render: one line, no job",
    "test_an_output_dir": "2. an output dir: link, source tree, read-only",
    "test_analysis_options": "3. a judging sweep's analysis options, before any call",
    "test_several_runs": "4. one analysis over runs of different tables or texts: refused",
    "test_links": "5. links (a job's or analysis's dir, the cache) and a foreign SQLite file: refused",
    "test_server_answers": "6. server answers: malformed logprobs or counts, a deadline, the key scrubbed",
    "test_disk": "7. a locked cache, a full disk: one line, nothing paid twice, no debris",
    "test_a_lone_surrogate": "8. input text with a lone surrogate, before any job",
    "test_numbers": "9. numbers: alpha unrounded, BT ties, a constant-per-wording grid collapsed",
}


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "faults.xml"
        t0 = time.perf_counter()
        rc = subprocess.call(
            [sys.executable, "-m", "pytest", *TESTS, "-m", "faults", "-q", "-p", "no:cacheprovider",
             f"--junitxml={xml}", *argv],
            cwd=REPO,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = case.get("name", "").split("[")[0]
            two = [row for key, row in ROUND_TWO.items() if name.startswith(key)]
            fault = FAULTS.get(name) or (two[0] if two else HOSTILE)
            kinds = {child.tag for child in case}
            skipped = case.find("skipped")
            if skipped is not None and "xfail" in (skipped.get("type") or "") + (
                skipped.get("message") or ""
            ):
                outcome = "not yet"
            elif "skipped" in kinds:
                outcome = "skipped"
            elif kinds & {"failure", "error"}:
                outcome = "failed"
            else:
                outcome = "held"
            rows[fault]["runs"] += 1
            rows[fault][outcome] += 1
    print("\n| fault | runs | held | not yet | skipped | failed |\n|---|---|---|---|---|---|")
    # the faults, the hostile inputs, then issue 46's items by number
    order = list(dict.fromkeys([*FAULTS.values(), HOSTILE, *sorted(set(ROUND_TWO.values()))]))
    for fault, n in sorted(rows.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        cells = [n["runs"], n["held"], n["not yet"], n["skipped"], n["failed"]]
        print(f"| {fault} | " + " | ".join(str(c) for c in cells) + " |")
    total = {k: sum(n[k] for n in rows.values()) for k in ("runs", "held", "not yet", "skipped", "failed")}
    print("| all | " + " | ".join(str(v) for v in total.values()) + " |")
    print(f"\nwall time {wall / 60:.1f} min (pytest exit status {rc})")
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
