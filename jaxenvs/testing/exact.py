"""The exact tier of `verify_port`: a deterministic port stepped from reference states
(`state_to_jax`) and replaying whole reference trajectories."""

from __future__ import annotations

import jax
import numpy as np

from jaxenvs.testing.reference import Side
from jaxenvs.testing.runs import (
    ATOL,
    REPLAY_ATOL,
    REPLAY_RTOL,
    RTOL,
    compiled,
    flat,
    rebuild_state,
    replay_fn,
    state_step_fn,
)
from jaxenvs.testing.verdict import Pending, exact_statistic


def state_template(env, params):
    """Shapes and dtypes of the unwrapped port's state (nothing is computed)."""
    return jax.eval_shape(env.unwrapped.reset, jax.random.key(0), params)[1]


def port_states(env, params, cores_and_times):
    """A batch of the port's (wrapped) states from `(state_to_jax result, t)` pairs."""
    t_leaves, t_def = jax.tree.flatten(state_template(env, params))
    states = []
    for core, t in cores_and_times:
        leaves, treedef = jax.tree.flatten(core)
        if treedef != t_def:
            raise ValueError(f"state_to_jax returned {treedef}; the unwrapped port's state (env.unwrapped.reset_env) is {t_def}")
        core = jax.tree.unflatten(t_def, [np.asarray(x, tl.dtype) for x, tl in zip(leaves, t_leaves)])
        states.append(rebuild_state(env, core, t))
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)


def step_from_states(env, params, recorded, key, stochastic, power, detect) -> Pending:
    """The port stepped from the reference states in `recorded`: exactly compared (deterministic
    port) or as distributions per state (stochastic; supporting)."""
    resamples = len(recorded[0][4])
    state_batch = port_states(env, params, [(core, t) for _, t, core, _, _ in recorded])
    actions = np.stack([np.asarray(r[3]) for r in recorded])
    keys = jax.random.split(jax.random.fold_in(key, 1 << 30), len(recorded))
    nobs, reward, term, trunc = compiled("state step", state_step_fn, env, resamples)(params, state_batch, actions, keys)
    p_obs = flat(nobs, 2)  # [S, R, D]
    p_rew = np.asarray(reward, np.float64).reshape(len(recorded), resamples, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    name = "step from reference states (obs, reward, flags)"
    if not stochastic:
        for s, (i, t, _, a, outs) in enumerate(recorded):
            r_obs, r_rew, r_term, r_trunc = outs[0]
            where = f"after reference episode {i} step {t}, action {np.asarray(a).tolist()}"
            for what, pv, rv, exact in (
                ("terminated", p_term[s, 0], r_term, True),
                ("truncated", p_trunc[s, 0], r_trunc, True),
                ("observation", p_obs[s, 0], r_obs, False),
                ("reward", p_rew[s, 0], r_rew, False),
            ):
                same = np.array_equal(pv, rv) if exact else np.allclose(pv, rv, rtol=RTOL, atol=ATOL)
                if not same:
                    return exact_statistic(name, False, len(recorded), len(recorded),
                                  f"{what} {np.asarray(pv).tolist()} {where}",
                                  f"{np.asarray(rv).tolist()} (floats compared with rtol={RTOL:g}, atol={ATOL:g})")
        return exact_statistic(name, True, len(recorded), len(recorded), f"{len(recorded)} states", "the same outcome at each")
    return exact_statistic(name, True, len(recorded), len(recorded), f"{len(recorded)} states", "the same outcome at each")


def replay_trajectories(env, params, horizon, ref: Side, starts: dict, act_template) -> Pending:
    """Every reference episode with a recorded initial state, replayed by the port with the
    reference's actions; every step's observation, reward and flags must agree."""
    episodes = sorted(starts)
    ref = ref.steps(horizon)  # a side is kept only as long as its longest episode
    states = port_states(env, params, [(starts[i], 0) for i in episodes])
    shape, dtype = act_template.shape, act_template.dtype
    actions = ref.act[episodes].reshape((len(episodes), horizon) + shape).astype(dtype)
    nobs, reward, term, trunc = compiled("replay", replay_fn, env, horizon)(params, states, actions, jax.random.key(0))
    p_obs, p_rew = flat(nobs, 2), np.asarray(reward, np.float64).reshape(len(episodes), horizon, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    alive = ref.alive[episodes]
    name = "trajectory replay (every step)"
    checks = (
        ("terminated", p_term, ref.term[episodes], None),
        ("truncated", p_trunc, ref.trunc[episodes], None),
        ("observation", p_obs, ref.nobs[episodes], (REPLAY_RTOL, REPLAY_ATOL)),
        ("reward", p_rew, ref.rew[episodes], (REPLAY_RTOL, REPLAY_ATOL)),
    )
    first_bad = None
    for what, pv, rv, tol in checks:
        if tol is None:
            bad = (pv != rv) & alive
        else:
            close = np.isclose(pv, rv, rtol=tol[0], atol=tol[1]).reshape(pv.shape[:2] + (-1,)).all(-1)
            bad = ~close & alive
        if bad.any():
            e, t = np.argwhere(bad)[np.argmin(np.argwhere(bad)[:, 1])]
            if first_bad is None or t < first_bad[2]:
                first_bad = (what, e, t, pv[e, t], rv[e, t])
    steps = int(alive.sum())
    if first_bad is not None:
        what, e, t, pv, rv = first_bad
        a = ref.act[episodes[e], : t + 1].reshape((t + 1,) + shape).tolist()
        return exact_statistic(name, False, steps, steps,
                      f"{what} {np.asarray(pv).tolist()} at step {t} of reference episode {episodes[e]} (actions {a})",
                      f"{np.asarray(rv).tolist()} (floats within rtol={REPLAY_RTOL:g}, atol={REPLAY_ATOL:g})")
    return exact_statistic(name, True, steps, steps, f"{len(episodes)} episodes, {steps} steps", "the same at every step")
