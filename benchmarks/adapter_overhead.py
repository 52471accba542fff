"""What the Gymnasium / SB3 adapters cost on top of the raw jitted jaxenvs step, in one run.

Paths, each a Python loop of single steps with random actions (compile time excluded):

* ``raw jit (async)``: ``jax.jit(vmap(env.step))`` on ``jaxenvs.make(id)`` (TimeLimit + AutoReset),
  state and actions already on the device, no host sync until the end: the dispatch floor;
* ``raw jit (sync)``: the same, waiting for every step's results (a host-side loop must);
* ``GymnasiumEnv``: the single-env adapter (num_envs 1 only);
* ``GymnasiumVectorEnv next/same``: the vector adapter in NEXT_STEP / SAME_STEP autoreset mode;
* ``SB3VecEnv``: the SB3 adapter (per-env info dicts built on the host).

Prints steps/s (vector steps and env steps) and the adapter's extra time per call over the
synchronised raw step::

    python benchmarks/adapter_overhead.py                            # GridWorld-v0, 1/64/1024 envs
    python benchmarks/adapter_overhead.py --env PointEnv-v0 --num-envs 1 256 --seconds 2
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import numpy as np

import jaxenvs
from jaxenvs.adapters.gymnasium import GymnasiumEnv, GymnasiumVectorEnv
from jaxenvs.adapters.sb3 import SB3VecEnv
from jaxenvs.spaces import to_gymnasium


def timed(step_fn, actions, seconds: float) -> float:
    """Calls per second of ``step_fn(action)`` cycling through ``actions`` for about ``seconds``."""
    step_fn(actions[0])  # compile / warm up
    n, t0 = 0, time.perf_counter()
    while True:
        for a in actions:
            step_fn(a)
        n += len(actions)
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n / elapsed


def raw_paths(env_id: str, num_envs: int, actions, seconds: float) -> dict:
    env = jaxenvs.make(env_id)
    params = env.default_params

    @jax.jit
    def step(keys, state, action):
        def one(key, state, action):
            key, sub = jax.random.split(key)
            obs, state, reward, terminated, truncated, info = env.step(sub, state, action, params)
            return key, obs, state, reward, terminated, truncated, info

        return jax.vmap(one)(keys, state, action)

    keys = jax.random.split(jax.random.key(0), num_envs)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    dev_actions = [jax.device_put(a) for a in actions]
    carry = {"keys": keys, "state": state}

    def async_step(a):
        out = step(carry["keys"], carry["state"], a)
        carry["keys"], carry["state"] = out[0], out[2]
        return out

    def sync_step(a):
        out = async_step(a)
        jax.block_until_ready(out)

    rate_async = timed(async_step, dev_actions, seconds)
    jax.block_until_ready(carry["state"])
    return {"raw jit (async)": rate_async, "raw jit (sync)": timed(sync_step, dev_actions, seconds)}


def adapter_paths(env_id: str, num_envs: int, actions, seconds: float) -> dict:
    out = {}
    if num_envs == 1:
        env = GymnasiumEnv(env_id)
        env.reset(seed=0)

        def single(a):
            if any(env.step(a)[2:4]):
                env.reset()

        out["GymnasiumEnv"] = timed(single, [a[0] for a in actions], seconds)
    for mode, name in (("NextStep", "next"), ("SameStep", "same")):
        venv = GymnasiumVectorEnv(env_id, num_envs, autoreset_mode=mode)
        venv.reset(seed=0)
        out[f"GymnasiumVectorEnv {name}"] = timed(venv.step, actions, seconds)
    sb3 = SB3VecEnv(env_id, num_envs, seed=0)
    sb3.reset()
    out["SB3VecEnv"] = timed(sb3.step, actions, seconds)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GridWorld-v0")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing length per path")
    args = parser.parse_args()

    print(f"{args.env} on {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}, "
          f"python {platform.python_version()}")
    print(f"{'path':<26} {'envs':>6} {'calls/s':>10} {'env steps/s':>12} {'extra us/call':>14}")
    single_space = to_gymnasium(jaxenvs.make(args.env).action_space())
    for n in args.num_envs:
        rng = np.random.default_rng(0)
        single_space.seed(int(rng.integers(2**31)))
        actions = [np.stack([single_space.sample() for _ in range(n)]) for _ in range(64)]
        actions = [a.astype(np.float32 if a.dtype.kind == "f" else np.int32) for a in actions]
        rates = raw_paths(args.env, n, actions, args.seconds)
        rates.update(adapter_paths(args.env, n, actions, args.seconds))
        floor = rates["raw jit (sync)"]
        for name, rate in rates.items():
            extra = "" if name.startswith("raw") else f"{1e6 / rate - 1e6 / floor:>14.1f}"
            print(f"{name:<26} {n:>6} {rate:>10.0f} {rate * n:>12.0f} {extra:>14}")


if __name__ == "__main__":
    main()
