"""jaxenvs: reinforcement-learning environments as pure JAX functions.

    import jax, jaxenvs
    env = jaxenvs.make("GridWorld-v0")
    obs, state = env.reset(jax.random.key(0))
    obs, state, reward, terminated, truncated, info = env.step(jax.random.key(1), state, 0)
"""

from jaxenvs import rendering, rollout, sharding, spaces, wrappers
from jaxenvs.core import ActionError, Environment, Traits
from jaxenvs.registration import EnvSpec, describe, make, pprint_registry, register, registry, spec
from jaxenvs.vector import VectorEnv
from jaxenvs.wrappers.checked import checked
from jaxenvs.checker import check_env

from jaxenvs import envs  # noqa: E402  (registers the built-in environments)

__version__ = "0.1.0"

__all__ = [
    "Environment",
    "Traits",
    "ActionError",
    "EnvSpec",
    "make",
    "register",
    "registry",
    "spec",
    "pprint_registry",
    "describe",
    "checked",
    "check_env",
    "VectorEnv",
    "spaces",
    "wrappers",
    "rollout",
    "rendering",
    "sharding",
]
