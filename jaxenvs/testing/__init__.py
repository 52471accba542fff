"""What users' own test suites need: port verification, the checker as an assertion, trace counts.

    from jaxenvs.testing import verify_port, PortMismatch, PortInconclusive, assert_env_ok, assert_max_traces

* `verify_port` -- does a jaxenvs port behave like the Gymnasium/PettingZoo environment it was
  ported from? A verdict of pass, fail (`PortMismatch`) or inconclusive (`PortInconclusive`),
  with stated power and a `PortReport` to keep as a certificate (`jaxenvs.testing.port_verification`);
* `assert_env_ok` -- `jaxenvs.check_env` as a pytest-friendly assertion;
* `assert_max_traces` -- fail when a jitted function is traced more often than expected.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from jaxenvs._traces import TraceCounter, TraceCountError
from jaxenvs.checker import CheckReport, EnvCheckError, check_env
from jaxenvs.testing.reference import ReferenceCache
from jaxenvs.testing.report import PortInconclusive, PortMismatch, PortReport, Statistic
from jaxenvs.testing.port_verification import ALPHA, DETECT, MAX_EPISODES, POWER, VerifySettings, verify_port

__all__ = [
    "verify_port",
    "VerifySettings",
    "ALPHA",
    "DETECT",
    "POWER",
    "MAX_EPISODES",
    "PortMismatch",
    "PortInconclusive",
    "PortReport",
    "ReferenceCache",
    "Statistic",
    "assert_env_ok",
    "assert_max_traces",
    "TraceCountError",
]


def assert_env_ok(env, params: Any = None, **check_kwargs) -> CheckReport:
    """Assert that ``env`` keeps the jaxenvs environment contract (`jaxenvs.check_env` with
    ``check_kwargs``: ``key``, ``num_steps``, ``num_envs``, ``skip``). On a violation raises
    ``AssertionError`` whose message names the environment, the rule and the offending leaf, e.g.
    ``"<GridWorld ...> breaks the environment contract: [dtype-stable] state.t: ..."``; pytest
    shows it without the checker's internals. Returns the `jaxenvs.checker.CheckReport`."""
    __tracebackhide__ = True
    try:
        return check_env(env, params, **check_kwargs)
    except EnvCheckError as e:
        raise AssertionError(f"{env!r} breaks the environment contract: {e}") from None


def assert_max_traces(fn: Callable | None = None, *, n: int = 1) -> Callable:
    """Decorator: fail with `TraceCountError` when ``fn``'s Python body runs more than ``n``
    times, i.e. when ``jax.jit`` traces it again (a weak type, a static argument or a shape that
    drifts between calls). Put it under ``jax.jit``::

        @jax.jit
        @assert_max_traces(n=1)
        def step(key, state, action):
            return env.step(key, state, action)

    The wrapped function has ``.traces`` (the count so far) and ``.reset_traces()``.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"assert_max_traces needs n as an int >= 0, got {n!r}")
    if fn is None:
        return functools.partial(assert_max_traces, n=n)
    if not callable(fn):
        raise TypeError(f"assert_max_traces decorates a function, got {type(fn).__name__}")
    return TraceCounter().counted(fn, getattr(fn, "__qualname__", "fn"), max_traces=n)
