"""An API key is never written anywhere: results, logs, transcripts, Hydra's records, Ray's logs.

One real ``sr-dist`` run against the scripted OpenAI-compatible server on 127.0.0.1 with a
known fake key in ``SR_DIST_TEST_KEY``. The script makes the run produce every kind of output:
tool calls (candidate rows), a 429 (retry), a 500 whose body *echoes the key* (as real providers
do for a bad key), an unreadable tool call (a parse error), and a submit. Then every file the
run wrote (Parquet as bytes and decoded, Hydra's output folder, the transcript, Ray's session
logs) and the process's stdout/stderr are scanned for the key and its random part. The server
must have received the key, so a leak path exists for the scan to catch.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.robustness.cli_support import run_sr_dist
from tests.support.chat_server import ScriptedChatServer, chat_completion, error, tool_call

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")]

TRUTH = "exp(-(theta/sigma)**2/2)/(sqrt(2*pi)*sigma)"


def _script(key: str) -> list[object]:
    return [
        chat_completion("Let me try two shapes.", tool_calls=[
            tool_call("evaluate_formulas", {"expressions": ["c*theta", "a*exp(-theta**2/b)/sigma"]})]),
        error(429, "rate limited, slow down", headers={"Retry-After": "0"}),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c/sigma"]})]),
        error(500, f"Incorrect API key provided: {key}. You can find your API key at https://x",
              type="server_error"),
        chat_completion("Broken call.", tool_calls=[tool_call("evaluate_formulas", '{"expressions": [')]),
        chat_completion(tool_calls=[tool_call("submit_formula", {"expression": TRUTH})]),
    ]


def _files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def _parquet_strings(path: Path) -> str:
    table = pq.read_table(path)
    parts = [str(table.schema.metadata or {})]
    for column in table.columns:
        parts.extend(str(v) for v in column.to_pylist())
    return "\n".join(parts)


@pytest.fixture()
def ray_tmp() -> Iterator[Path]:
    """A short private RAY_TMPDIR (Ray's socket paths must stay under ~100 characters)."""
    path = Path(tempfile.mkdtemp(prefix="srdk-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_api_key_is_never_written(tmp_path: Path, ray_tmp: Path) -> None:
    secret_part = secrets.token_hex(16)
    key = f"sk-test-{secret_part}"
    needles = (key.encode(), secret_part.encode())
    results = tmp_path / "out"
    transcript = tmp_path / "transcript.jsonl"
    with ScriptedChatServer(_script(key)) as server:
        done = run_sr_dist(
            tmp_path, "model=openai", f"model.base_url={server.base_url}", "model.model=scripted",
            "model.api_key_env=SR_DIST_TEST_KEY", f"model.record_path={transcript}",
            "+model.retry_base_delay_s=0", "model.max_retries=2",
            "dataset.source=feynman:I.6.2", "dataset.n=500", "search.agents=1",
            "search.max_seconds=30", "search.target_nmse=null", f"results.path={results}",
            timeout=300, SR_DIST_TEST_KEY=key, RAY_TMPDIR=str(ray_tmp))
        requests = server.completion_requests
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]

    # The key did travel, to the server only: the scan below has something to catch.
    assert requests and all(r.headers.get("authorization") == f"Bearer {key}" for r in requests)
    assert len(requests) >= len(_script(key))

    # The run produced what we scan: candidate rows, a runs row, Hydra's record, a transcript.
    parquet = [p for p in _files(results) if p.suffix == ".parquet"]
    assert any("candidates" in p.parts for p in parquet) and any("runs" in p.parts for p in parquet)
    assert list((results / "_hydra").rglob("config.yaml")) and transcript.stat().st_size > 0
    ray_logs = [p for p in _files(ray_tmp) if "logs" in p.parts]
    assert ray_logs, "Ray's session logs were not found under RAY_TMPDIR"

    leaks: list[str] = []
    scanned = 0
    for root in (tmp_path, ray_tmp):
        for path in _files(root):
            data = path.read_bytes()
            scanned += 1
            if any(n in data for n in needles):
                leaks.append(str(path))
            if path.suffix == ".parquet":
                text = _parquet_strings(path)
                if key in text or secret_part in text:
                    leaks.append(f"{path} (decoded)")
    if key in output or secret_part in output:
        leaks.append("stdout/stderr")
    print(f"\nscanned {scanned} files ({len(parquet)} Parquet, {len(ray_logs)} Ray logs) and the "
          f"process output; {len(requests)} requests carried the key")
    assert leaks == [], f"the API key was written to: {leaks}"
    print("echoed error seen:", "Incorrect API key provided" in output + transcript.read_text())


def test_a_key_written_into_the_config_is_refused_and_not_recorded(tmp_path: Path) -> None:
    """A user who puts the key on the command line gets a refusal; the key must not persist."""
    secret_part = secrets.token_hex(16)
    done = run_sr_dist(tmp_path, "model=openai", "model.model=m", f"+model.api_key=sk-test-{secret_part}",
                       "results.path=out")
    assert done.returncode == 2 and "secrets do not belong in the config" in done.stderr
    assert secret_part not in done.stdout + done.stderr
    leaked = [str(p) for p in _files(tmp_path) if secret_part.encode() in p.read_bytes()]
    assert leaked == [], f"the key was written to {leaked}"
