"""Write the site's generated files into ``docs/generated/`` (git-ignored).

* ``gallery/<id>.gif``: every registered environment under a uniformly random policy, rendered
  with its own ``render`` (``jaxenvs.rollout.rollout`` + ``jaxenvs.rendering``);
* ``gallery.md``: the gallery, one section per registered environment (id, traits, GIF, and the
  learning curve in ``docs/images/curves/<id>.png`` with the command that made it);
* ``steps_per_sec.md`` and ``train_speed.md``: the benchmark tables, read from
  ``benchmarks/results/*.json`` (what ``benchmarks/steps_per_sec.py`` and
  ``benchmarks/train_speed.py`` write);
* ``steps_per_sec.png``: the throughput plot those results come with.

``python docs/gen_assets.py`` regenerates everything; the MkDocs hook (``docs/hooks.py``) calls
:func:`generate` before every build and only writes what is missing or older than its sources.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "generated"
RESULTS = ROOT / "benchmarks" / "results"
CURVES = ROOT / "docs" / "images" / "curves"  # learning curves of python -m jaxenvs.train (committed)
GALLERY_ENVS, GALLERY_STEPS, GALLERY_FRAMES = 8, 24, 48  # episodes tried, steps each, frames per GIF


def _stale(target: Path, *sources: Path) -> bool:
    return not target.exists() or any(s.exists() and s.stat().st_mtime > target.stat().st_mtime for s in sources)


def gallery(force: bool = False) -> list[Path]:
    """One GIF per registered environment (random policy, auto-reset on), and the gallery's sections."""
    import jaxenvs
    from jaxenvs.rendering import save_gif

    folder = OUT / "gallery"
    folder.mkdir(parents=True, exist_ok=True)
    sections, written = [], []
    for env_id in sorted(i for i in jaxenvs.registry if "/" not in i):  # the built-in namespace
        env = jaxenvs.make(env_id)
        path = folder / f"{env_id}.gif"
        source = Path(sys.modules[type(env.unwrapped).__module__].__file__)
        if force or _stale(path, source):
            save_gif(episode_frames(env_id), path, fps=env.render_fps)
            written.append(path)
        t = env.traits
        what = (type(env.unwrapped).__doc__ or "").strip().splitlines()[0]
        section = [
            f"## `{env_id}`",
            "",
            f"{what} {t.num_agents} agent{'s' if t.num_agents != 1 else ''}; {t.chance}, {t.information} information, "
            f"{t.utility.replace('_', '-')}, {t.reward_style} reward.",
            "",
            f"![{env_id} under a random policy](generated/gallery/{env_id}.gif)",
        ]
        if (CURVES / f"{env_id}.png").exists():
            section += [
                "",
                "Learning curve of PPO with the tuned defaults, one seed, made by",
                "",
                "```bash",
                f"python -m jaxenvs.train --env {env_id} --out /tmp/curves",
                "```",
                "",
                f"![{env_id} learning curve](images/curves/{env_id}.png)",
            ]
        sections.append("\n".join(section))
    _write_if_changed(OUT / "gallery.md", "\n\n".join(sections) + "\n")
    return written


def episode_frames(env_id: str):
    """uint8[T, H, W, 3]: whole episodes of ``env_id`` under a random policy, one after another,
    each from its initial state to the state it ended in (at most ``GALLERY_FRAMES`` frames)."""
    import numpy as np

    import jaxenvs

    env = jaxenvs.make(env_id, autoreset=False)  # the state an episode ends in stays visible
    frames, done = _rollout_frames(env)  # [steps + 1, envs, H, W, 3], [steps, envs]
    frames, done = np.asarray(frames), np.asarray(done)
    clips = []
    for e in range(GALLERY_ENVS):
        end = int(np.argmax(done[:, e])) + 1 if done[:, e].any() else GALLERY_STEPS
        clips.append(frames[: end + 1, e])
        if sum(len(c) for c in clips) >= GALLERY_FRAMES:
            break
    return np.concatenate(clips)[:GALLERY_FRAMES]


def _rollout_frames(env):
    """A random-policy rollout of ``GALLERY_ENVS`` envs and the frames of every state it passed
    through (the last one included), in one compiled program."""
    import jax
    import jax.numpy as jnp

    from jaxenvs.rollout import random_policy, rollout

    @jax.jit
    def run(key):
        traj = rollout(env, key, random_policy(env), GALLERY_STEPS, num_envs=GALLERY_ENVS)
        states = jax.tree.map(lambda s, last: jnp.concatenate([s, last[None]]), traj.state, traj.last_state)
        return jax.vmap(jax.vmap(env.render))(states), traj.terminated | traj.truncated

    return run(jax.random.key(0))


def _si(x: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}" if unit == "M" else f"{x / scale:.0f}k"
    return f"{x:.0f}"


def steps_per_sec_table() -> str:
    """Markdown table of ``benchmarks/results/steps_per_sec.json``: one row per (env, num_envs),
    one column per method, steps/s; then GridWorld's paired ratios against the lean loop, when
    the results hold them."""
    data = json.loads((RESULTS / "steps_per_sec.json").read_text())
    methods = list(dict.fromkeys(r["method"] for r in data["rows"]))
    cells: dict[tuple, dict] = {}
    for r in data["rows"]:
        cells.setdefault((r["env"], r["num_envs"]), {})[r["method"]] = r["steps_per_sec"]
    lines = [
        f"Random-policy steps/s on {data['device']}, jax {data['jax']} (compilation excluded).",
        "",
        "| env | envs | " + " | ".join(methods) + " |",
        "|---|---:|" + "---:|" * len(methods),
    ]
    for (env_id, n), row in cells.items():
        lines.append(f"| {env_id} | {n} | " + " | ".join(_si(row[m]) if m in row else "-" for m in methods) + " |")
    # the paired ratios against the lean loop (steps_per_sec.py's paired_ratios), where recorded
    paired: dict[tuple, dict] = {}
    for r in data["rows"]:
        if "vs_lean" in r:
            paired.setdefault((r["env"], r["num_envs"]), {})[r["method"]] = r["vs_lean"]
    if paired:
        cols = list(dict.fromkeys(m for row in paired.values() for m in row))
        lines += [
            "",
            "As a fraction of the lean loop, from paired timings (the programs timed in turn, the "
            "median ratio over rounds):",
            "",
            "| env | envs | " + " | ".join(cols) + " |",
            "|---|---:|" + "---:|" * len(cols),
        ]
        for (env_id, n), row in paired.items():
            lines.append(f"| {env_id} | {n} | " + " | ".join(f"{row[m]:.2f}" if m in row else "-" for m in cols) + " |")
    return "\n".join(lines) + "\n"


def train_speed_table() -> str:
    """Markdown table of ``benchmarks/results/train_speed.json``: env-steps/s and time to solve
    per environment and trainer."""
    data = json.loads((RESULTS / "train_speed.json").read_text())
    names = {"jaxenvs": "jaxenvs PPO", "sb3": "SB3 PPO, same settings", "sb3_defaults": "SB3 PPO, its defaults"}
    lines = [
        f"PPO on {data['device']}, jax {data['jax']} (compilation reported apart).",
        "",
        "| env | trainer | env-steps/s | compile (s) | time to solve (s) | steps to solve |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for env_id, res in data["results"].items():
        for key, label in names.items():
            if key not in res:
                continue
            r = res[key]
            compile_s = f"{r['compile_s']:.1f}" if r.get("compile_s") is not None else "-"
            solved = r.get("solved")
            t = f"{r['time_to_solve_s']:.2f}" if solved else "not solved"
            n = f"{r['steps_to_solve']:,}" if solved else "-"
            lines.append(f"| {env_id} | {label} | {_si(r['steps_per_sec'])} | {compile_s} | {t} | {n} |")
    return "\n".join(lines) + "\n"


def _write_if_changed(path: Path, text: str) -> bool:
    # rewriting an unchanged file would make `mkdocs serve` rebuild in a loop
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


def checker_rules_table() -> str:
    """Markdown table of the checker's rules, from `jaxenvs.checker.RULEBOOK`."""
    from jaxenvs.checker import RULEBOOK

    lines = ["| rule | what it checks | skippable |", "|---|---|---|"]
    for rule in RULEBOOK.values():
        text = rule.text.replace("|", "\\|")
        lines.append(f"| `{rule.id}` | {text} | {'yes' if rule.skippable else ''} |")
    return "\n".join(lines) + "\n"


def benchmarks() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    _write_if_changed(OUT / "checker_rules.md", checker_rules_table())
    _write_if_changed(OUT / "steps_per_sec.md", steps_per_sec_table())
    _write_if_changed(OUT / "train_speed.md", train_speed_table())
    png = RESULTS / "steps_per_sec.png"
    if _stale(OUT / "steps_per_sec.png", png):
        shutil.copyfile(png, OUT / "steps_per_sec.png")


def generate(force: bool = False) -> None:
    benchmarks()
    gallery(force=force)


if __name__ == "__main__":
    generate(force=True)
    print(f"wrote {OUT}")
