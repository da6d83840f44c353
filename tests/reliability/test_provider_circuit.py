"""The model provider's circuit: a behaviour table over a fake clock, and the OpenAI adapter
against a real HTTP server on 127.0.0.1 (storms, recovery, fail-fast, one provider's storm
not touching another)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sr_dist.conversation import Context
from sr_dist.models import ModelConfigError, ModelError, build_model
from sr_dist.models.circuit import (
    CIRCUIT_OPEN,
    CircuitPolicy,
    ProviderCircuit,
    call_through_circuit,
    reset_circuits,
)
from tests.support.chat_server import ScriptedChatServer, chat_completion, error


@pytest.fixture(autouse=True)
def fresh_circuits() -> Iterator[None]:
    reset_circuits()
    yield
    reset_circuits()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _fail(kind: str = "rate_limited", retryable: bool = True) -> ModelError:
    return ModelError("provider: HTTP 429: slow down", kind=kind, status=429, retryable=retryable)


# Each case: a sequence of events on one circuit (failures=2, recovery_s=10), and the outcome
# of each: "ok" (the call ran and succeeded), the error kind it raised, or "refused" (failed
# fast without running). Events: "ok" a call that succeeds, "err" a call whose retries are
# spent on a retryable error, "bad" a non-retryable error, "+N" the clock moves on N seconds.
CASES: list[tuple[str, list[str], list[str]]] = [
    ("success keeps it closed", ["ok", "ok"], ["ok", "ok"]),
    ("one storm call retried, then success", ["err-ok"], ["ok"]),
    ("storm opens it", ["err-err"], [CIRCUIT_OPEN]),
    ("open refuses without calling", ["err-err", "ok"], [CIRCUIT_OPEN, "refused"]),
    ("probe after recovery closes it", ["err-err", "+10", "ok", "ok"],
     [CIRCUIT_OPEN, "", "ok", "ok"]),
    ("failed probe reopens it", ["err-err", "+10", "err", "ok"],
     [CIRCUIT_OPEN, "", CIRCUIT_OPEN, "refused"]),
    ("non-retryable errors do not count", ["bad", "bad", "ok"], ["auth", "auth", "ok"]),
    ("a success resets the count", ["err-ok", "err-ok", "err-ok"], ["ok", "ok", "ok"]),
]


@pytest.mark.parametrize("name, events, expected", CASES, ids=[c[0] for c in CASES])
def test_circuit_behaviour(name: str, events: list[str], expected: list[str]) -> None:
    clock = _Clock()
    circuit = ProviderCircuit("openai|x|m", CircuitPolicy(failures=2, recovery_s=10.0, pause_s=0.0),
                              clock=clock)
    outcomes: list[str] = []
    for event in events:
        if event.startswith("+"):
            clock.now += float(event[1:])
            outcomes.append("")
            continue
        script = event.split("-")
        ran: list[str] = []

        def call() -> str:
            step = script[min(len(ran), len(script) - 1)]
            ran.append(step)
            if step == "err":
                raise _fail()
            if step == "bad":
                raise _fail("auth", retryable=False)
            return "ok"

        try:
            outcomes.append(call_through_circuit(circuit, call, sleep=lambda s: None))
        except ModelError as err:
            outcomes.append("refused" if not ran else err.kind)
    assert outcomes == expected


def test_the_open_error_names_the_provider_and_the_last_error() -> None:
    circuit = ProviderCircuit("openai|http://h/v1|gpt", CircuitPolicy(failures=1, pause_s=0.0))
    with pytest.raises(ModelError) as info:
        call_through_circuit(circuit, lambda: (_ for _ in ()).throw(_fail()), sleep=lambda s: None)
    text = str(info.value)
    assert info.value.kind == CIRCUIT_OPEN and not info.value.retryable
    assert "openai|http://h/v1|gpt" in text and "HTTP 429: slow down" in text
    assert circuit.phase == "open" and circuit.opened == 1


def _model(server: ScriptedChatServer, **options: Any) -> Any:
    cfg = {"provider": "openai", "model": "m", "base_url": server.base_url, "api_key_env": None,
           "max_retries": 1, "retry_base_delay_s": 0.001, "retry_max_delay_s": 0.001, **options}
    return build_model(cfg, sleep=lambda s: None)


def _context() -> Context:
    return Context(system="s", messages=[{"role": "user", "content": "hi"}])


def test_a_storm_that_passes_is_ridden_out() -> None:
    script = [error(500, "boom"), error(429, "slow"), error(503, "busy"), chat_completion("ok")]
    with ScriptedChatServer(script) as server:
        model = _model(server, circuit_failures=3)
        assert model.call(_context()).text == "ok"
        assert len(server.requests) == 4  # two failed calls of two attempts, then success
        assert model.circuit.phase == "closed"


def test_a_storm_that_lasts_opens_the_circuit_and_later_calls_fail_fast() -> None:
    with ScriptedChatServer([]) as server:  # every request: 500
        model = _model(server, circuit_failures=2, circuit_recovery_s=3600)
        with pytest.raises(ModelError) as info:
            model.call(_context())
        assert info.value.kind == CIRCUIT_OPEN and "HTTP 500" in str(info.value)
        assert len(server.requests) == 2 * 2
        # Another agent in this process, same provider: refused without a request.
        other = _model(server, circuit_failures=2, circuit_recovery_s=3600)
        with pytest.raises(ModelError, match="circuit is open"):
            other.call(_context())
        assert len(server.requests) == 4


def test_one_providers_storm_does_not_stop_another() -> None:
    with ScriptedChatServer([]) as down, ScriptedChatServer([chat_completion("fine")]) as up:
        with pytest.raises(ModelError):
            _model(down, circuit_failures=1).call(_context())
        assert _model(up, circuit_failures=1).call(_context()).text == "fine"


def test_without_circuit_keys_the_adapter_only_retries() -> None:
    with ScriptedChatServer([]) as server:
        model = _model(server)
        assert model.circuit is None
        with pytest.raises(ModelError) as info:
            model.call(_context())
        assert info.value.kind == "server_error" and len(server.requests) == 2


@pytest.mark.parametrize("key, value", [("circuit_failures", 0), ("circuit_failures", "3"),
                                        ("circuit_recovery_s", -1), ("circuit_failures", True)])
def test_bad_circuit_options_are_config_errors(key: str, value: Any) -> None:
    with ScriptedChatServer([]) as server, pytest.raises(ModelConfigError, match=f"model.{key}"):
        _model(server, **{key: value})
