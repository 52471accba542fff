"""State mappings from Gymnasium's classic-control environments to gymnax's, for
`jaxenvs.testing.verify_port(..., state_to_jax=...)`: each takes the reference (a
`gymnasium.make(...)` env, wrappers included) and returns the state of the unwrapped
`jaxenvs.make("gymnax/<id>")` port (gymnax's `EnvState`) at the reference's current state.

    from jaxenvs.adapters.gymnax_states import STATE_TO_JAX, reference
    verify_port(jaxenvs.make("gymnax/CartPole-v1"), reference("CartPole-v1"), state_to_jax=STATE_TO_JAX["CartPole-v1"])

`time` is the steps taken so far (the reference's `TimeLimit` count), which gymnax's state
carries; floats are rounded to the port's float32. Needs gymnax and gymnasium.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATE_TO_JAX", "reference", "elapsed_steps"]


def elapsed_steps(ref) -> int:
    """Steps since the reference's last reset (its `TimeLimit` wrapper's count; 0 without one)."""
    env = ref
    while env is not None:
        n = getattr(env, "_elapsed_steps", None)
        if n is not None:
            return int(n)
        env = getattr(env, "env", None)
    return 0


def _module(name: str):
    import importlib

    return importlib.import_module(f"gymnax.environments.classic_control.{name}")


def _f32(x) -> np.float32:
    return np.float32(x)


def cartpole(ref):
    x, x_dot, theta, theta_dot = ref.unwrapped.state
    return _module("cartpole").EnvState(time=np.int32(elapsed_steps(ref)), x=_f32(x), x_dot=_f32(x_dot),
                                        theta=_f32(theta), theta_dot=_f32(theta_dot))


def acrobot(ref):
    a1, a2, v1, v2 = ref.unwrapped.state
    return _module("acrobot").EnvState(time=np.int32(elapsed_steps(ref)), joint_angle1=_f32(a1), joint_angle2=_f32(a2),
                                       velocity_1=_f32(v1), velocity_2=_f32(v2))


def mountain_car(ref):
    position, velocity = ref.unwrapped.state
    return _module("mountain_car").EnvState(time=np.int32(elapsed_steps(ref)), position=_f32(position),
                                            velocity=_f32(velocity))


def continuous_mountain_car(ref):
    position, velocity = ref.unwrapped.state
    return _module("continuous_mountain_car").EnvState(time=np.int32(elapsed_steps(ref)), position=_f32(position),
                                                       velocity=_f32(velocity))


def pendulum(ref):
    theta, theta_dot = ref.unwrapped.state
    last_u = ref.unwrapped.last_u
    return _module("pendulum").EnvState(time=np.int32(elapsed_steps(ref)), theta=_f32(theta), theta_dot=_f32(theta_dot),
                                        last_u=_f32(0.0 if last_u is None else np.ravel(last_u)[0]))


STATE_TO_JAX = {
    "CartPole-v1": cartpole,
    "Acrobot-v1": acrobot,
    "MountainCar-v0": mountain_car,
    "MountainCarContinuous-v0": continuous_mountain_car,
    "Pendulum-v1": pendulum,
}


def reference(env_id: str, **kwargs):
    """The zero-argument factory of Gymnasium's `env_id` (the reference of `gymnax/<env_id>`)."""
    if env_id not in STATE_TO_JAX:
        raise ValueError(f"no state mapping for {env_id!r}; the mapped ids are {sorted(STATE_TO_JAX)}")

    def factory():
        import gymnasium

        return gymnasium.make(env_id, **kwargs)

    factory.__qualname__ = f"gymnasium.make({env_id!r})"
    return factory
