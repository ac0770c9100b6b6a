"""A key's value never leaves the environment, even when a server echoes it back; redaction by whole tokens.

A stub OpenAI-compatible server on 127.0.0.1 answers every request with HTTP 400 and a body that echoes
the request's headers (the ``Authorization: Bearer <key>``) and the bare key. The run's console, run.log,
results.json and W&B files must not hold the key's value, and honest text keeps its words.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from promptlottery.tracking.secrets import key_variables, redact_text, remember_secret_values
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO
from tests.test_reliability import ENV


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"bad request {dict(self.headers)}; key {key} unknown"}})
        data = body.encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def echo_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("multirun", [False, True], ids=["run", "sweep"])
def test_a_key_echoed_by_the_server_is_in_no_output(tmp_path, echo_url, multirun):
    key = "sk-echo" + secrets.token_hex(12)
    env = {**ENV, "OPENAI_API_KEY": key}
    cmd = [
        sys.executable,
        "-m",
        "run",
        *(
            ["-m", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
            if multirun
            else [f"hydra.run.dir={tmp_path / 'run'}"]
        ),
        "backbone=gpt4o",
        f"backbone.backend.base_url={echo_url}",
        "logger=wandb",
        f"logger.dir={tmp_path / 'wandb'}",
        "dataset.limit=2",
        "max_retries=0",
        f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'out'}",
    ]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode != 0
    assert "HTTP 400" in p.stderr and "bad request" in p.stderr  # the server's error is shown ...
    assert key not in p.stdout + p.stderr  # ... without the key
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    names = {f.name for f in files}
    assert {"results.json", "run.log"} <= names and any(f.suffix == ".wandb" for f in files)
    rec = json.loads(next(tmp_path.rglob("results.json")).read_text())
    assert rec["status"] == "failed" and "HTTP 400" in rec["error"]
    assert [str(f) for f in files if key.encode() in f.read_bytes()] == []


def test_the_values_of_configured_key_variables_are_scrubbed_by_whole_token(monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "s3cr3t-value-1234")
    config = {
        "backbone": {"backend": {"api_key_env": "MY_JUDGE_KEY", "base_url": "http://h/v1"}},
        "extra": {"token": "${oc.env:OTHER_TOKEN,}"},
    }
    assert key_variables(config) >= {"MY_JUDGE_KEY", "OTHER_TOKEN", "OPENAI_API_KEY"}
    remember_secret_values(config)
    assert redact_text("key s3cr3t-value-1234 unknown") == "key *** unknown"
    assert redact_text('{"k": "s3cr3t-value-1234"}') == '{"k": "***"}'
    # whole tokens only: a longer token that contains the value is another token
    assert redact_text("xs3cr3t-value-12345") == "xs3cr3t-value-12345"


@pytest.mark.parametrize(
    "text",
    [
        "prompt group G1: no variant 'P9'",
        "malformed prompt group (KeyError: 'variants')",
        "malformed prompt group (KeyError: no variant)",
        "keyboard: qwerty",
    ],
)
def test_redaction_keeps_honest_text(text):
    assert redact_text(text) == text


def test_redaction_still_hides_assigned_secrets():
    assert redact_text("api_key=abc123def") == "api_key=***"
    assert redact_text("OPENAI_API_KEY: 'abc123def'") == "OPENAI_API_KEY: '***'"
    assert redact_text("apiKey=abc123def") == "apiKey=***"


def test_a_backend_error_never_carries_the_key_it_was_sent_with(monkeypatch):
    from promptlottery.backends.openai_wire import classify_http_error

    monkeypatch.setenv("ECHO_TEST_KEY", "sk-raw-echoed-key-42")
    body = '{"error": "Authorization: Bearer sk-raw-echoed-key-42 is invalid (sk-raw-echoed-key-42)"}'
    err = classify_http_error(400, body, where="stub", model="m", api_key_env="ECHO_TEST_KEY")
    assert "sk-raw-echoed-key-42" not in str(err) and "is invalid" in str(err)
