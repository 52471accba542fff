"""What `jaxenvs.check_env` reports: a violated rule (`EnvCheckError`) or what it ran (`CheckReport`)."""

from __future__ import annotations

import dataclasses

__all__ = ["EnvCheckError", "CheckReport"]


class EnvCheckError(AssertionError):
    """A violated rule of the environment contract.

    ``rule`` is the stable rule id (one of `RULES`), ``path`` the offending leaf ("" when
    the rule concerns no single leaf). ``str(err)`` is ``"[rule] path: message"``.
    """

    def __init__(self, rule: str, message: str, path: str = ""):
        self.rule = rule
        self.path = path
        super().__init__(f"[{rule}] {path}: {message}" if path else f"[{rule}] {message}")


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """What `check_env` ran: the rules it checked and what the random rollout saw."""

    env: str
    num_envs: int
    num_steps: int
    rules: tuple[str, ...]
    skipped: tuple[str, ...]
    terminated: int  # number of (env, step) transitions with terminated=True in the rollout
    truncated: int  # ... with truncated=True
