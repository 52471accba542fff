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
from jaxenvs.testing.verdict import Pending, VerifySettings, exact_statistic

DRIFT_FACTOR = 10.0  # a separated trajectory may diverge at most this many times its rounding twin's divergence
TWIN_SCALE = 10.0  # the twins' state is moved by this many times the measured one-step rounding at every step
TWINS = 4  # rounding twins per trajectory


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


def step_from_states(env, params, recorded, key, stochastic, settings: VerifySettings) -> Pending:
    """The port stepped from the reference states in `recorded`: exactly compared (deterministic
    port) or as distributions per state (stochastic; supporting)."""
    power, detect = settings.power, settings.detect
    resamples = len(recorded[0][4])
    state_batch = port_states(env, params, [(core, t) for _, t, core, _, _ in recorded])
    actions = np.stack([np.asarray(r[3]) for r in recorded])
    keys = jax.random.split(jax.random.fold_in(key, 1 << 30), len(recorded))
    nobs, reward, term, trunc = compiled("state step", state_step_fn, env, resamples)(params, state_batch, actions, keys)
    p_obs = flat(nobs, 2)  # [S, R, D]
    p_rew = np.asarray(reward, np.float64).reshape(len(recorded), resamples, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    name = "step from reference states (obs, reward, flags)"
    rounding = 0.0
    if not stochastic and len(recorded):
        r_obs = np.stack([np.asarray(o[0][0], np.float64).ravel() for *_, o in recorded])
        r_rew = np.stack([np.asarray(o[0][1], np.float64).ravel() for *_, o in recorded])
        p_all, r_all = np.concatenate([p_obs[:, 0], p_rew[:, 0]], 1), np.concatenate([r_obs, r_rew], 1)
        rounding = float(np.max(np.abs(p_all - r_all) / (np.abs(r_all) + ATOL / RTOL), initial=0.0))
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
        out = exact_statistic(name, True, len(recorded), len(recorded), f"{len(recorded)} states",
                              f"the same outcome at each (largest relative difference {rounding:.2g})")
        out.rounding = rounding
        return out
    return exact_statistic(name, True, len(recorded), len(recorded), f"{len(recorded)} states", "the same outcome at each")


def twin_replay_fn(env, horizon: int):
    """Jitted `run(params, states, actions, key, eps)`: `replay_fn`'s replay with every floating
    leaf of the state moved after each step by `eps` of itself (plus `ATOL / RTOL`), in a random
    direction: the port's own trajectory under a rounding-sized error fed in at every step (the
    reference's float64 against a float32 port: an error of that order at every step)."""
    import jax.numpy as jnp

    def nudge(state, key, eps):
        leaves, treedef = jax.tree.flatten(state)
        keys = jax.random.split(key, len(leaves))
        out = []
        for x, k in zip(leaves, keys):
            if jnp.issubdtype(x.dtype, jnp.floating):
                sign = jnp.where(jax.random.bernoulli(k, 0.5, x.shape), 1.0, -1.0)
                x = (x + sign * eps * (jnp.abs(x) + ATOL / RTOL)).astype(x.dtype)
            out.append(x)
        return jax.tree.unflatten(treedef, out)

    def one(params, state, actions, key, eps):
        def body(state, xs):
            t, action = xs
            nobs, nstate, reward, term, trunc, _ = env.step(jax.random.fold_in(key, t), state, action, params)
            return nudge(nstate, jax.random.fold_in(key, horizon + t), eps), (nobs, reward, term, trunc)

        return jax.lax.scan(body, nudge(state, jax.random.fold_in(key, 2 * horizon), eps),
                            (jnp.arange(horizon), actions))[1]

    def run(params, states, actions, key, eps):
        keys = jax.random.split(key, len(actions))
        return jax.vmap(one, in_axes=(None, 0, 0, 0, None))(params, states, actions, keys, eps)

    return jax.jit(run)


def replay_trajectories(env, params, horizon, ref: Side, starts: dict, act_template, rounding: float | None = None) -> Pending:
    """Every reference episode with a recorded initial state, replayed by the port with the
    reference's actions; every step's observation, reward and flags must agree.

    Drift: floats agree within `REPLAY_RTOL`/`REPLAY_ATOL`, or, once a trajectory has separated
    beyond them, within `DRIFT_FACTOR` times the divergence of its *rounding twins* (the largest of
    `TWINS`, the largest so far along the trajectory): the port replaying the same actions with
    its state moved at every step by `TWIN_SCALE` times the one-step rounding `rounding` (the
    largest relative one-step difference from reference states, `step_from_states`; None: no
    drift allowed; `twin_replay_fn`). A faithful port of a chaotic or
    unstable system in another float precision separates from the reference at the rate its own
    rounding separates it from itself; a bug adds a difference its twins do not have (a jump at a
    wall, a changed constant). Once both have separated the trajectories are unrelated: the
    one-step tier from reference states is what certifies those steps. Flags must agree
    until a trajectory separates; after that the comparison ends at the first flag difference
    (the episodes' ends may differ once their states do)."""
    episodes = sorted(starts)
    ref = ref.steps(horizon)  # a side is kept only as long as its longest episode
    states = port_states(env, params, [(starts[i], 0) for i in episodes])
    shape, dtype = act_template.shape, act_template.dtype
    actions = ref.act[episodes].reshape((len(episodes), horizon) + shape).astype(dtype)
    E = len(episodes)
    drift = rounding is not None
    nobs, reward, term, trunc = compiled("replay", replay_fn, env, horizon)(params, states, actions, jax.random.key(0))
    p_obs, p_rew = flat(nobs, 2), np.asarray(reward, np.float64).reshape(E, horizon, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    if drift:  # the twins: rounding fed in at every step
        eps = TWIN_SCALE * max(rounding, float(np.finfo(np.float32).eps))
        k = TWINS
        t_obs, t_rew, _, _ = compiled("twin replay", twin_replay_fn, env, horizon)(
            params, jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * k), states), np.concatenate([actions] * k),
            jax.random.key(7), np.float32(eps))
        twin_real = np.concatenate([flat(t_obs, 2), np.asarray(t_rew, np.float64).reshape(k * E, horizon, -1)], 2)
        twin_real = twin_real.reshape((k, E) + twin_real.shape[1:])
    alive = ref.alive[episodes]
    r_obs, r_rew = ref.nobs[episodes], ref.rew[episodes]
    name = "trajectory replay (every step)"
    p_real, r_real = np.concatenate([p_obs[:E], p_rew[:E]], 2), np.concatenate([r_obs, r_rew], 2)
    tol = REPLAY_ATOL + REPLAY_RTOL * np.abs(r_real)
    off = np.nan_to_num((np.abs(p_real - r_real) / tol).max(-1), nan=np.inf)  # > 1: outside the plain tolerance
    flag_bad = ((p_term[:E] != ref.term[episodes]) | (p_trunc[:E] != ref.trunc[episodes])) & alive
    separated = np.zeros_like(alive)
    if drift:
        # the twins' envelope: the largest divergence of any twin so far (a divergence that has
        # grown does not need to stay grown: chaotic trajectories fold back); a twin that left the
        # numbers (inf, NaN) excuses nothing
        spread = np.nan_to_num(np.abs(twin_real - p_real[None]) / tol[None], nan=0.0, posinf=0.0)
        twin = np.maximum.accumulate(spread.max(-1).max(0), axis=1)
        out = off > 1 + DRIFT_FACTOR * twin  # beyond what the twin's divergence allows
        separated = np.maximum.accumulate((off > 1) & ~out & alive, axis=1)  # from the first excused step on
        flag_stop = np.maximum.accumulate(flag_bad & separated, axis=1)  # the episodes' ends may differ now
        compared = alive & ~np.concatenate([np.zeros((E, 1), bool), flag_stop[:, :-1]], axis=1)
        bad_real = out & compared
        flag_bad = flag_bad & compared & ~separated
    else:
        bad_real = (off > 1) & alive
    first_bad = None
    for what, bad in (("flags", flag_bad), ("observation or reward", bad_real)):
        if bad.any():
            e, t = np.argwhere(bad)[np.argmin(np.argwhere(bad)[:, 1])]
            if first_bad is None or t < first_bad[2]:
                first_bad = (what, e, t)
    steps = int(alive.sum())
    tol_txt = f"floats within rtol={REPLAY_RTOL:g}, atol={REPLAY_ATOL:g}" + (
        f", or {DRIFT_FACTOR:g}x their rounding twin's divergence once separated" if drift else "")
    if first_bad is not None:
        what, e, t = first_bad
        a = ref.act[episodes[e], : t + 1].reshape((t + 1,) + shape).tolist()
        pv = np.concatenate([p_obs[e, t], p_rew[e, t], [p_term[e, t], p_trunc[e, t]]]).tolist()
        rv = np.concatenate([r_obs[e, t], r_rew[e, t], [ref.term[episodes[e], t], ref.trunc[episodes[e], t]]]).tolist()
        extra = ""
        if drift and what != "flags":
            extra = f"; {off[e, t]:.3g}x the tolerance, its rounding twin {twin[e, t]:.3g}x"
        return exact_statistic(name, False, steps, steps,
                      f"(observation, reward, terminated, truncated) {pv} at step {t} of reference episode "
                      f"{episodes[e]} (actions {a}){extra}",
                      f"{rv} ({tol_txt})")
    sep_rows = separated.any(1)
    if sep_rows.any():
        first = separated.argmax(1)[sep_rows]
        ratio = (off / np.maximum(twin, 1e-12))[separated & alive]
        drift_txt = (f"; {int(sep_rows.sum())} of {E} trajectories separate beyond the tolerance from step "
                     f"{int(first.min())} (median {int(np.median(first))}) at the rate rounding predicts: their divergence "
                     f"stays within {DRIFT_FACTOR:g}x that of the port's own replays ({TWINS} twins) with their state moved by "
                     f"{TWIN_SCALE:g}x the one-step rounding {rounding:.2g} at every step (at most "
                     f"{float(ratio.max()):.2g}x)")
    else:
        drift_txt = ""
    out = exact_statistic(name, True, steps, steps, f"{E} episodes, {steps} steps{drift_txt}",
                          f"the same at every step ({tol_txt})")
    out.drift = {"separated": int(sep_rows.sum()), "episodes": E,
                 "first_step": int(separated.argmax(1)[sep_rows].min()) if sep_rows.any() else None,
                 "rounding": rounding}
    return out
