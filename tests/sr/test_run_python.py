"""``run_python``: the opt-in analysis tool runs model code confined, and its limits hold.

Every call goes through a real catalog and a real sandboxed child process (nothing is
mocked): runaway code ends in a clean tool failure (``ok`` False, a reason, the limit named),
never an exception; normal code sees the training split and only it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sr_dist.agent import AgentLimits
from sr_dist.conf.schema import SearchConfig, SettingsError
from sr_dist.data import Dataset
from sr_dist.models import build_model
from sr_dist.sr import build_agent
from sr_dist.sr.catalog import build_formula_catalog
from sr_dist.sr.episode import EpisodeContext
from sr_dist.sr.formula_tools import FORMULA_TOOLS, OPT_IN_TOOLS
from sr_dist.sr.sandbox import RunPythonLimits
from sr_dist.tools import ToolCall
from tests.support.agent_problem import FailingEvaluator, write_problem
from tests.support.chat_server import ScriptedChatServer, chat_completion, tool_call

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the sandbox is Linux-only")

#: Tight limits so runaway code ends within seconds; the wall clock is generous (a loaded
#: machine starts Python slowly) except where the wall limit itself is under test.
LIMITS = RunPythonLimits(cpu_s=1, memory_mb=256, wall_s=60, file_mb=1, output_chars=2000, processes=8)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return write_problem(tmp_path_factory.mktemp("run-python") / "problem.csv")


def run(dataset: Dataset, code: str, limits: RunPythonLimits = LIMITS) -> Any:
    evaluator = FailingEvaluator("run_python must not fit anything")
    context = EpisodeContext.create(dataset, evaluator, run_python=limits)
    catalog = build_formula_catalog(context, (*FORMULA_TOOLS, "run_python"))
    result = catalog.invoke(ToolCall("run_python", {"code": code}, id="call_py"))
    assert evaluator.calls == 0
    return result


def test_normal_code_computes_from_the_training_split_only(dataset: Dataset) -> None:
    code = (
        "print(len(y), X.shape[1], names, target)\n"
        "print(repr(float(np.mean(y))), repr(float(df['x0'].sum())))\n"
        "print(repr(float(np.polyfit(x0 * x1, y, 1)[0])))\n"
    )
    result = run(dataset, code)
    assert result.ok, result.result_str
    lines = result.result["stdout"].splitlines()
    assert lines[0] == f"{len(dataset.y_train)} 2 ['x0', 'x1'] {dataset.target_name}"
    mean, x0_sum = (float(v) for v in lines[1].split())
    assert mean == pytest.approx(float(np.mean(dataset.y_train)), rel=1e-12)
    assert x0_sum == pytest.approx(float(np.sum(dataset.X_train[:, 0])), rel=1e-12)
    assert float(lines[2]) == pytest.approx(2.5, rel=1e-9)  # the law behind the data
    # Only the training rows: every training target is there, no validation or test one is,
    # and no other data file sits in its directory.
    held_out = [float(v) for v in np.concatenate([dataset.y_val, dataset.y_test])]
    train = [float(v) for v in dataset.y_train]
    seen = run(dataset, f"import os\nprint(bool(np.isin({train!r}, y).all()), bool(np.isin({held_out!r}, y).any()),"
                        " len(set(y.tolist())))\nprint(sorted(n for n in os.listdir('.') if n.endswith(('.npy', '.csv', '.parquet'))))\n")
    assert seen.ok, seen.result_str
    first, files = seen.result["stdout"].splitlines()
    assert first == f"True False {len(set(train))}"
    assert files == "['X.npy', 'y.npy']"
    assert result.result["exit"] == 0 and result.result["limit_hit"] is None


def test_run_python_is_opt_in() -> None:
    assert "run_python" in OPT_IN_TOOLS and "run_python" not in FORMULA_TOOLS
    assert SearchConfig().tools is None  # null: the default set, without run_python
    assert SearchConfig(tools=["evaluate_formulas", "run_python"]).tools == ("evaluate_formulas", "run_python")
    with pytest.raises(SettingsError, match="unknown tool 'run_pyton'"):
        SearchConfig(tools=["run_pyton"])
    with pytest.raises(SettingsError, match="run_python_wall_s must be positive"):
        SearchConfig(run_python_wall_s=0)


@pytest.mark.parametrize(
    ("code", "limit"),
    [
        ("while True:\n    pass\n", "cpu"),
        ("hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n", "memory"),
        ("import os\nwhile True:\n    os.fork()\n", "processes"),
        ("open('big.bin', 'wb').write(b'0' * (4 * 2**20))\n", "file_size"),
    ],
    ids=["infinite-loop", "memory-bomb", "fork-bomb", "file-size"],
)
def test_runaway_code_ends_in_a_clean_failure_naming_its_limit(dataset: Dataset, code: str, limit: str) -> None:
    result = run(dataset, code)
    assert not result.ok
    assert result.error_kind == "tool_error"
    assert result.result["limit_hit"] == limit, result.result_str
    assert "the code was stopped" in result.result_str


def test_the_wall_clock_limit_kills_a_sleeping_program(dataset: Dataset) -> None:
    limits = RunPythonLimits(cpu_s=5, memory_mb=256, wall_s=4, file_mb=1, processes=8)
    result = run(dataset, "import time\ntime.sleep(600)\n", limits)
    assert not result.ok and result.result["limit_hit"] == "wall"
    assert result.result["exit"] is None


def test_a_socket_connect_fails_even_to_a_listener_on_loopback(dataset: Dataset) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('connected')\n"
        result = run(dataset, code)
        assert not result.ok
        assert result.result["limit_hit"] is None and result.result["exit"] == 1
        assert "connected" not in result.result["stdout"]
        assert "Error" in result.result["stderr"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached it
    assert result.result["isolation"]["network"] == "ok"


def test_writes_outside_the_scratch_directory_fail(dataset: Dataset, tmp_path: Path) -> None:
    outside = tmp_path / "open-to-all"
    outside.mkdir()
    outside.chmod(0o777)  # file permissions would allow it: only the sandbox stops the write
    target = outside / "escaped.txt"
    code = f"open('inside.txt', 'w').write('ok')\nprint(open('inside.txt').read())\nopen({str(target)!r}, 'w').write('x')\n"
    result = run(dataset, code)
    assert not result.ok
    assert result.result["stdout"].strip() == "ok"  # its own scratch directory is writable
    assert "PermissionError" in result.result["stderr"]
    assert not target.exists()
    assert result.result["isolation"]["files"] == "ok"


def test_long_output_is_truncated_and_says_so(dataset: Dataset) -> None:
    result = run(dataset, "print('x' * 50000)\n")
    assert result.ok
    assert result.result["truncated"] is True and result.result["limit_hit"] == "output"
    assert len(result.result["stdout"]) < 2200
    assert "output truncated at 2000 characters" in result.result["stdout"]


def test_an_error_in_the_code_comes_back_with_its_traceback(dataset: Dataset) -> None:
    result = run(dataset, "print('before')\n1 / 0\n")
    assert not result.ok and result.result["exit"] == 1
    assert "ZeroDivisionError" in result.result_str and "before" in result.result_str
    empty = run(dataset, "   ")
    assert not empty.ok and "code is empty" in empty.result_str


@pytest.mark.parametrize("tool_mode", ["native", "json"])
def test_an_agent_uses_run_python_through_the_loopback_server(dataset: Dataset, tool_mode: str) -> None:
    code = "print('rows', len(y))"
    if tool_mode == "native":
        first = chat_completion(tool_calls=[tool_call("run_python", {"code": code}, id="py")])
    else:
        first = chat_completion("```json\n" + json.dumps({"tool": "run_python", "params": {"code": code}}) + "\n```")
    with ScriptedChatServer([first, chat_completion("Done looking.")]) as server:
        model = build_model({"provider": "openai", "base_url": server.base_url, "model": "test",
                             "api_key_env": None, "tool_mode": tool_mode})
        agent = build_agent(model, dataset, FailingEvaluator(), tools=(*FORMULA_TOOLS, "run_python"),
                            limits=AgentLimits(max_turns=2), run_python=LIMITS)
        result = agent.run()
        requests = server.completion_requests
    assert result.tool_calls == 1 and result.failed_tool_calls == 0
    told = requests[0].body["messages"][0]["content"]
    assert "run_python runs your own Python" in told
    if tool_mode == "native":
        assert "run_python" in [t["function"]["name"] for t in requests[0].body["tools"]]
        answer = requests[1].body["messages"][-1]
        assert answer["role"] == "tool" and answer["tool_call_id"] == "py"
    else:
        assert "### run_python" in told
        answer = requests[1].body["messages"][-1]
    assert f"rows {len(dataset.y_train)}" in answer["content"]




def _processes_naming(marker: str) -> set[int]:
    """Live (non-zombie: their command line is readable) processes whose command line holds
    ``marker`` (a sandbox's names its settings file, inside its scratch directory)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            pids.add(int(entry))
    return pids


def test_code_that_leaves_the_process_group_dies_at_the_wall_clock(
        dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # setsid() takes the code out of the process group the parent kills at the wall clock;
    # it must die all the same (with it, everything it started in its PID namespace).
    import tempfile

    marker = str(tmp_path / "scratch-parent")
    os.mkdir(marker)
    monkeypatch.setattr(tempfile, "tempdir", marker)  # this test's sandboxes alone name it
    limits = RunPythonLimits(cpu_s=5, memory_mb=256, wall_s=4, file_mb=1, processes=8)
    result = run(dataset, "import os, time\nos.setsid()\ntime.sleep(600)\n", limits)
    assert not result.ok and result.result["limit_hit"] == "wall"
    survivors: set[int] = set()
    for _ in range(50):  # a killed process may take a moment to be reaped
        survivors = _processes_naming(marker)
        if not survivors:
            break
        time.sleep(0.1)
    for pid in survivors:  # leave nothing of this test behind, whatever the outcome
        os.kill(pid, 9)
    assert not survivors, f"the code outlived its wall clock: pids {sorted(survivors)}"

def test_concurrent_calls_do_not_use_up_each_others_process_limit(dataset: Dataset) -> None:
    # Agents of one run call run_python at once. As root every sandbox runs as the same
    # nobody, whose processes RLIMIT_NPROC counts together: each sandbox's limit must count
    # the others' processes as already there, or the later ones cannot even start the code.
    from concurrent.futures import ThreadPoolExecutor

    from sr_dist.sr.sandbox import run_sandboxed

    limits = RunPythonLimits(cpu_s=5, memory_mb=256, wall_s=60, file_mb=1, processes=2)
    X = np.asarray(dataset.X_train, dtype=float)
    y = np.asarray(dataset.y_train, dtype=float)
    code = "import time\ntime.sleep(3)\nprint('done')\n"
    with ThreadPoolExecutor(6) as pool:
        runs = list(pool.map(lambda _: run_sandboxed(code, X, y, dataset.feature_names, "y", limits),
                             range(6)))
    assert [r.stdout.strip() for r in runs] == ["done"] * 6, [r.stderr for r in runs if not r.ok]


def test_a_unix_socket_outside_the_sandbox_cannot_be_reached(dataset: Dataset, tmp_path: Path) -> None:
    # A network namespace does not cover Unix sockets named by a path (a D-Bus bus, a
    # daemon's control socket): one that every user may write must stay out of reach too.
    folder = tmp_path / "sockets"
    folder.mkdir()
    folder.chmod(0o755)
    path = folder / "open.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        path.chmod(0o777)
        listener.listen(1)
        listener.setblocking(False)
        code = (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\n"
                "s.sendall(b'hi')\nprint('connected')\n")
        result = run(dataset, code)
        assert not result.ok and "connected" not in result.result["stdout"]
        assert "PermissionError" in result.result["stderr"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached it
    assert result.result["isolation"]["unix_sockets"] == "ok"
    assert run(dataset, "import socket\na, b = socket.socketpair()\na.sendall(b'x')\nprint(b.recv(1))\n").ok
