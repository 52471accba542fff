"""jaxenvs' PPO against rejax 0.1.3's, phase by phase, paired in one process.

Both trainers run at the same settings (``train.configs`` tuned defaults, ``--num-envs`` overriding
the batch for both) on the same environment (rejax through ``jaxenvs.adapters.gymnax.to_gymnax``),
as ``benchmarks/train_speed.py`` sets them up. Each side gets four jitted programs, timed in turn
(interleaved, ``--repeats`` rounds, medians reported):

* ``chunk``: ``--updates`` whole updates in one call (jaxenvs ``run_updates``; rejax ``train`` with
  its evaluation callback off): the figure the targets are about, in env-steps/s;
* ``rollout``: ``--updates`` rollouts (``num_steps`` steps in ``num_envs`` envs: sampling, env
  step, storage) in one ``lax.scan``, the parameters fixed;
* ``rollout+gae``: the same with the bootstrap values and GAE after each rollout;
* ``update``: ``--updates`` whole updates (rollout, GAE, epochs x minibatches of gradient steps,
  metrics) in one ``lax.scan``: ``chunk`` without rejax's ``train`` wrapper.

GAE's share is ``rollout+gae - rollout``, the optimisation's (and metrics') ``update - rollout+gae``.

``--ops``: each side's ``update`` program is then run under JAX's profiler
(`jaxenvs.profile.op_costs`) and its operations' time is split into the network's matrix products
(forward, and the gradient's), the minibatch shuffle's sorts and the rest, with the costliest
operations listed: where an update's time goes, op by op, on both sides.

rejax runs twice: as shipped (elementwise gradient clipping, a constant learning rate) and with
jaxenvs' optimizer (global-norm clipping and the config's learning-rate decay,
`rejax_peer.with_optimizer`), so that the second ratio compares the same work per gradient step.

    python benchmarks/ppo_phases.py --env GridWorld-v0 --num-envs 32
    python benchmarks/ppo_phases.py --env GridWorld-v0 --num-envs 1024 --updates 4
    python benchmarks/ppo_phases.py --env gymnax/CartPole-v1
    python benchmarks/ppo_phases.py --env GridWorld-v0 --num-envs 32 --ops
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxenvs.train  # noqa: E402,F401  (sets XLA flags before JAX compiles anything)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxenvs  # noqa: E402
from jaxenvs.train.configs import get_config  # noqa: E402
from jaxenvs.train.trainers import make_trainer  # noqa: E402


SAME = "rejax, jaxenvs' optimizer"  # rejax_peer.with_optimizer: the same work per gradient step


def jaxenvs_programs(cfg, updates: int):
    trainer = make_trainer(cfg)
    hp = cfg.hparams()
    runner = jax.block_until_ready(trainer.init(jax.random.key(0)))

    def rollout(r, _):
        r, (traj, _) = trainer._rollout(r, hp)
        return r, traj.value.sum()

    def rollout_gae(r, _):
        r2, (traj, _) = trainer._rollout(r, hp)
        return r2, trainer.advantages(traj, trainer._next_values(r.params, traj), hp)[0].sum()

    progs = {
        "chunk": jax.jit(lambda r: trainer._run_updates(r, hp, updates)[0].params),
        "rollout": jax.jit(lambda r: jax.lax.scan(rollout, r, None, updates)[1]),
        "rollout+gae": jax.jit(lambda r: jax.lax.scan(rollout_gae, r, None, updates)[1]),
        "update": jax.jit(lambda r: trainer._run_updates(r, hp, updates)[0].params),
    }
    return progs, runner


def rejax_programs(cfg, updates: int, same_optimizer: bool = False):
    from rejax_peer import rejax_ppo, with_optimizer

    algo = rejax_ppo(cfg, updates * cfg.steps_per_update)
    ts = algo.init_state(jax.random.key(0))
    if same_optimizer:
        ts = with_optimizer(ts, cfg)

    def rollout(ts, _):
        ts, traj = algo.collect_trajectories(ts)
        return ts, traj.value.sum()

    def rollout_gae(ts, _):
        ts, traj = algo.collect_trajectories(ts)
        last_val = algo.critic.apply(ts.critic_ts.params, ts.last_obs)
        last_val = jnp.where(ts.last_done, 0, last_val)
        return ts, algo.calculate_gae(traj, last_val)[0].sum()

    def update(ts, _):
        return algo.train_iteration(ts), None

    progs = {
        "chunk": jax.jit(lambda ts: algo.train(train_state=ts)[0].actor_ts.params),
        "rollout": jax.jit(lambda ts: jax.lax.scan(rollout, ts, None, updates)[1]),
        "rollout+gae": jax.jit(lambda ts: jax.lax.scan(rollout_gae, ts, None, updates)[1]),
        "update": jax.jit(lambda ts: jax.lax.scan(update, ts, None, updates)[0].actor_ts.params),
    }
    return progs, ts


def op_category(op) -> str:
    """``jaxenvs.profile.OpCost`` -> what it is part of: a matrix product of the network (forward,
    or the gradient's: XLA's op under ``transpose(jvp(...))``), the minibatch shuffle's sorts and
    binary search, or the rest (activations, losses, the optimizer, the environment, metrics)."""
    if op.name.startswith("dot") or op.source.endswith("dot_general") or "/dot_general" in op.source:
        return "matmul, gradient" if "transpose(" in op.source else "matmul, forward"
    if "sort" in op.source or "searchsorted" in op.source:
        return "shuffle (sorts)"
    return "other"


def op_breakdown(progs, state, updates: int, top: int = 8) -> dict:
    """The ``update`` program's operations (`jaxenvs.profile.op_costs`), per update: the time of all
    of them, by `op_category`, and the ``top`` costliest."""
    from jaxenvs.profile import op_costs

    compiled = progs["update"].lower(state).compile()
    ops = op_costs(compiled, lambda: compiled(state), calls=2)
    total = sum(o.seconds for o in ops)
    cats: dict[str, float] = {}
    for o in ops:
        cats[op_category(o)] = cats.get(op_category(o), 0.0) + o.seconds
    return {"ops_s_per_update": total / updates,
            "categories_s_per_update": {k: v / updates for k, v in sorted(cats.items(), key=lambda kv: -kv[1])},
            "top": [{**o.to_dict(), "seconds": o.seconds / updates, "calls": o.calls / updates,
                     "category": op_category(o)} for o in ops[:top]]}


def print_breakdown(name: str, b: dict) -> None:
    total = b["ops_s_per_update"]
    print(f"  {name}: its operations' time {total * 1e3:.2f} ms per update (under the profiler; threads summed)")
    for k, v in b["categories_s_per_update"].items():
        print(f"    {k:<18}{v * 1e3:>9.2f} ms {100 * v / total:>5.1f}%")
    for o in b["top"][:5]:
        print(f"      {100 * o['seconds'] / total:5.1f}%  {o['name'][:24]:<24} {o['shape'][:20]:<20} {o['source'][-70:]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="GridWorld-v0")
    p.add_argument("--num-envs", type=int, help="override the tuned num_envs (both trainers)")
    p.add_argument("--updates", type=int, default=8, help="updates per timed chunk (default: 8)")
    p.add_argument("--repeats", type=int, default=7, help="interleaved rounds (default: 7)")
    p.add_argument("--out", help="write the figures as JSON here")
    p.add_argument("--ops", action="store_true", help="also split each side's update into its operations")
    args = p.parse_args(argv)
    cfg = get_config(args.env) if args.num_envs is None else get_config(args.env, num_envs=args.num_envs)
    load0 = os.getloadavg()
    sides = {"jaxenvs": jaxenvs_programs(cfg, args.updates), "rejax": rejax_programs(cfg, args.updates),
             SAME: rejax_programs(cfg, args.updates, same_optimizer=True)}
    for progs, state in sides.values():  # compile
        for f in progs.values():
            jax.block_until_ready(f(state))
    times = {s: {k: [] for k in progs} for s, (progs, _) in sides.items()}
    for _ in range(args.repeats):
        for k in times["jaxenvs"]:
            for s, (progs, state) in sides.items():
                t0 = time.perf_counter()
                jax.block_until_ready(progs[k](state))
                times[s][k].append(time.perf_counter() - t0)
    med = {s: {k: float(np.median(v)) for k, v in t.items()} for s, t in times.items()}
    for s in med:
        m = med[s]
        m["gae"] = m["rollout+gae"] - m["rollout"]
        m["optimise+metrics"] = m["update"] - m["rollout+gae"]
        m["chunk_steps_per_sec"] = args.updates * cfg.steps_per_update / m["chunk"]
    paired = [r / j for j, r in zip(times["jaxenvs"]["chunk"], times["rejax"]["chunk"])]
    paired_same = [r / j for j, r in zip(times["jaxenvs"]["chunk"], times[SAME]["chunk"])]
    print(f"{cfg.env_id}, num_envs={cfg.num_envs}, num_steps={cfg.num_steps}, epochs={cfg.update_epochs}, "
          f"minibatches={cfg.num_minibatches}; {args.repeats} rounds; load {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"  {'ms (median)':<18}{'jaxenvs':>10}{'rejax':>10}{'rejax/jaxenvs':>15}{'rejax, same opt.':>18}{'ratio':>8}")
    for k in ("rollout", "gae", "optimise+metrics", "update", "chunk"):
        j, r, q = med["jaxenvs"][k] * 1e3, med["rejax"][k] * 1e3, med[SAME][k] * 1e3
        print(f"  {k:<18}{j:>10.2f}{r:>10.2f}{(r / j if j > 0 else float('nan')):>15.2f}{q:>18.2f}"
              f"{(q / j if j > 0 else float('nan')):>8.2f}")
    ratio, ratio_same = float(np.median(paired)), float(np.median(paired_same))
    print(f"  chunk env-steps/s: jaxenvs {med['jaxenvs']['chunk_steps_per_sec']:,.0f}, rejax "
          f"{med['rejax']['chunk_steps_per_sec']:,.0f}; paired ratio jaxenvs/rejax median {ratio:.2f}x "
          f"(min {min(paired):.2f}, max {max(paired):.2f})")
    print(f"  rejax with jaxenvs' optimizer {med[SAME]['chunk_steps_per_sec']:,.0f}; paired ratio median "
          f"{ratio_same:.2f}x (min {min(paired_same):.2f}, max {max(paired_same):.2f})")
    breakdown = {}
    if args.ops:
        for s in ("jaxenvs", SAME):
            breakdown[s] = op_breakdown(*sides[s], args.updates)
            print_breakdown(s, breakdown[s])
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"env": cfg.env_id, "num_envs": cfg.num_envs, "updates": args.updates, "repeats": args.repeats,
                       "load_avg_start": load0, "load_avg_end": os.getloadavg(), "median_s": med,
                       "paired_ratio_median": ratio, "paired_ratios": paired,
                       "paired_ratio_median_same_optimizer": ratio_same, "paired_ratios_same_optimizer": paired_same,
                       "jax": jax.__version__, **({"ops": breakdown} if breakdown else {})}, f, indent=1)
    return ratio


if __name__ == "__main__":
    main()
