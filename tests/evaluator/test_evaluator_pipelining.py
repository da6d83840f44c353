"""``Evaluator.begin``/``finish``: calls begun before the last one is finished answer exactly as
the same calls made one after another with ``fit_many``, over a generated stream of calls that
share structures, mix full fits and local searches, and finish in any order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator

#: Structures the generated calls draw from; several are the same canonical form spelled
#: differently, so later calls meet structures that earlier (unfinished) calls fit.
SHAPES = (
    "a*x0**2 + b*sin(k*x1)/x2", "b*sin(x1*k)/x2 + x0**2*a", "a*exp(-k*x2) + b*x0",
    "sin(k*x1 + p)*a + b", "a*x0/(x1 + k) + b*x2", "x2*b + a*x0/(k + x1)", "a*log(k*x0) + b",
    "a*x0**2 + b*x1 + c*x2 + d", "a*tanh(k*x0 - m) + b*x1", "x0*x1", "a*x0*x1 + b",
    "not a formula (", "a*x0 + b*q9",
)

Call = tuple[list[str], list[dict[str, float] | None] | None]


def _calls(seed: int, n_calls: int = 8) -> list[Call]:
    rng = np.random.default_rng(seed)
    calls: list[Call] = []
    for _ in range(n_calls):
        size = int(rng.integers(2, 7))
        texts = [SHAPES[int(i)] for i in rng.integers(0, len(SHAPES), size)]
        if rng.random() < 0.3:
            calls.append((texts, None))
            continue
        starts: list[dict[str, float] | None] = []
        for _ in texts:
            # Starts name a, b and k only where the formula has them; others start at 1.
            starts.append(None if rng.random() < 0.4 else
                          {"a": float(rng.uniform(0.5, 3.0))})
        calls.append((texts, starts))
    return calls


def _fixable(texts: Sequence[str], starts: list[dict[str, float] | None] | None
             ) -> list[dict[str, float] | None] | None:
    """Drop start names a formula lacks (a start naming an unknown constant is refused)."""
    if starts is None:
        return None
    return [None if s is None or "a*" not in t and "*a" not in t else s
            for t, s in zip(texts, starts, strict=True)]


def _key(result: Any) -> tuple[Any, ...]:
    return (result.expression, result.canonical, result.status, result.error,
            tuple(sorted(result.constants.items())), result.train_nmse, result.val_nmse,
            result.test_nmse, result.cached, result.local, result.iterations)


@pytest.fixture(scope="module")
def data(make_dataset: Callable[..., Dataset]) -> Dataset:
    return make_dataset(lambda X: 2.5 * X[:, 0] ** 2 + np.sin(1.3 * X[:, 1]) / X[:, 2],
                        noise=0.01)


def _sequential(data: Dataset, calls: list[Call]) -> tuple[list[list[Any]], int]:
    ev = Evaluator(data)
    answers = [ev.fit_many(t, starts=_fixable(t, s)) for t, s in calls]
    return answers, ev.stats()["fits"]


@pytest.mark.parametrize("seed", range(4))
def test_begun_calls_answer_as_sequential_calls(data: Dataset, seed: int) -> None:
    calls = _calls(seed)
    expected, expected_fits = _sequential(data, calls)
    ev = Evaluator(data)
    rng = np.random.default_rng(100 + seed)
    begun: list[Any] = []
    answers: dict[int, list[Any]] = {}
    for texts, starts in calls:
        begun.append(ev.begin(texts, _fixable(texts, starts)))
        # Finish a random number of the unfinished calls, in a random order.
        open_ = [j for j in range(len(begun)) if j not in answers]
        for j in rng.permutation(open_)[: int(rng.integers(0, len(open_) + 1))]:
            answers[int(j)] = ev.finish(begun[int(j)])
    for j in rng.permutation(len(begun)):
        answers.setdefault(int(j), ev.finish(begun[int(j)]))
    for i, want in enumerate(expected):
        assert [_key(r) for r in answers[i]] == [_key(r) for r in want], f"call {i}"
    assert ev.stats()["fits"] == expected_fits  # nothing fitted twice


def test_a_structure_in_flight_is_fitted_once(data: Dataset) -> None:
    ev = Evaluator(data)
    first = ev.begin(["a*x0**2 + b*sin(k*x1)/x2"])
    second = ev.begin(["b*sin(x1*k)/x2 + x0**2*a", "a*x0 + b"])
    assert ev.stats()["fits"] == 0  # nothing read back yet
    got_second = ev.finish(second)  # finishes the first call too
    assert ev.stats()["fits"] == 2
    assert got_second[0].cached and not got_second[1].cached
    got_first = ev.finish(first)
    assert got_first[0].constants["a"] == pytest.approx(got_second[0].constants["a"])
    assert ev.finish(first) is got_first  # finished calls return their answer again


def test_a_full_fit_request_refits_a_structure_searched_locally(data: Dataset) -> None:
    ev = Evaluator(data)
    local = ev.begin(["a*exp(-k*x2) + b*x0"], starts=[{"a": 1.0, "k": 0.5, "b": 1.0}])
    full = ev.begin(["a*exp(-k*x2) + b*x0"])
    got_local, got_full = ev.finish(local), ev.finish(full)
    assert got_local[0].local and not got_full[0].local and not got_full[0].cached
    assert ev.stats()["fits"] == 2


def test_finish_refuses_a_call_from_another_evaluator(data: Dataset) -> None:
    one, other = Evaluator(data), Evaluator(data)
    pending = one.begin(["a*x0 + b"])
    with pytest.raises(ValueError, match="begin"):
        other.finish(pending)
    assert one.finish(pending)[0].status == "ok"


class _FailsOnce(Evaluator):
    """Finishing its first call raises (as a failed read-back or refit would)."""

    failed = False

    def _finish(self, pending: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise FloatingPointError("read-back failed")
        return super()._finish(pending)


def test_a_call_whose_finishing_failed_says_so_and_the_later_calls_finish(data: Dataset) -> None:
    ev = _FailsOnce(data)
    first = ev.begin(["a*x0 + b"])
    second = ev.begin(["a*exp(-k*x2) + b*x0"])
    # Finishing the second finishes the first before it: the first's failure is kept for it.
    assert ev.finish(second)[0].status == "ok"
    with pytest.raises(RuntimeError, match="begin it again") as raised:
        ev.finish(first)
    assert isinstance(raised.value.__cause__, FloatingPointError)
    with pytest.raises(RuntimeError, match="begin it again"):
        ev.finish(first)  # and on every later try


def test_fit_many_raises_the_error_that_stopped_its_own_finishing(data: Dataset) -> None:
    ev = _FailsOnce(data)
    with pytest.raises(FloatingPointError, match="read-back failed"):
        ev.fit_many(["a*x0 + b"])
    assert ev.fit_many(["a*x0 + b"])[0].status == "ok"
