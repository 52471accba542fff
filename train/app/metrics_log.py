"""The per-update metrics of a run and their files, ``metrics.json`` and ``metrics.csv``.

The compiled update reports ``episodes`` (how many episodes ended in it) and the means
``episode_return``/``episode_length`` of those episodes (0 when none did: no NaN is made inside the
program, `train.base`); here, on the host, an update without episodes gets "no value" instead:
NaN in memory, ``null`` in ``metrics.json``, an empty cell in ``metrics.csv``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from ..checkpoint import write_text_atomic

__all__ = ["METRIC_KEYS", "LOSS_KEYS", "EPISODE_KEYS", "MetricsLog", "first_nonfinite_update"]

METRIC_KEYS = ("episode_return", "episode_length", "episodes", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_frac")
EPISODE_KEYS = ("episode_return", "episode_length")  # means over the episodes that ended: none without one
# Metrics that are never NaN in a healthy update.
LOSS_KEYS = ("pg_loss", "vf_loss", "entropy", "approx_kl", "loss", "value_mean")
METRICS_JSON, METRICS_CSV = "metrics.json", "metrics.csv"


class MetricsLog:
    """Per-update metrics of all seeds (float[num_updates, num_seeds] per name), the progress
    evaluations (one row per chunk) and their files."""

    def __init__(self, run_dir: Path, steps_per_update: int, owner: bool = True, updates_done: int = 0, num_seeds: int = 1):
        self.run_dir, self.steps_per_update, self.owner = run_dir, steps_per_update, owner  # owner: reads/writes files
        self.num_seeds = num_seeds
        self.data: dict[str, list] = {k: [] for k in METRIC_KEYS}
        self.progress: list[dict] = []  # {"env_steps": n, name: [per seed]}
        self.rebuilt = 0  # updates whose metrics were lost with a missing metrics.json (recorded without values)
        old = run_dir / METRICS_JSON
        if owner and updates_done and not old.exists():
            self.rebuilt = updates_done
        if owner and updates_done and old.exists():
            try:
                stored = json.loads(old.read_text())
                for k, rows in stored["per_seed"].items():  # null = no episode ended in that update
                    self.data[k] = [[math.nan if x is None else float(x) for x in row] for row in rows][:updates_done]
                self.progress = [r for r in stored.get("progress", []) if r["env_steps"] <= updates_done * steps_per_update]
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise ValueError(
                    f"{old} is damaged ({type(e).__name__}: {e}); it holds the metrics of the {updates_done} updates "
                    f"the checkpoint has done. Restore it, or delete it to resume with those updates recorded without values"
                ) from None
        if owner and updates_done:
            short = updates_done - len(self.data["episode_return"])
            if short > 0:  # metrics written before the checkpoint they belong to was lost: mark the gap
                for k in self.data:
                    width = len(self.data[k][0]) if self.data[k] else self.num_seeds
                    self.data[k].extend([[math.nan] * width for _ in range(short)])

    def append(self, metrics: dict):
        """Add a chunk's metrics (``{name: float[seeds, updates]}``)."""
        metrics = dict(metrics)
        if "episodes" in metrics:  # no episode ended: the means have no value
            none = np.asarray(metrics["episodes"]) == 0
            for k in EPISODE_KEYS:
                if k in metrics:
                    metrics[k] = np.where(none, np.nan, np.asarray(metrics[k], np.float64))
        for k, v in metrics.items():
            if k == "nonfinite":
                continue
            rows = np.asarray(v, np.float64).T.tolist()  # [seeds, L] -> L rows of seeds
            self.data.setdefault(k, [[math.nan] * len(rows[0]) for _ in range(self.updates - len(rows))] if rows else [])
            self.data[k].extend(rows)

    @property
    def updates(self) -> int:
        return max((len(v) for v in self.data.values()), default=0)

    def array(self, k) -> np.ndarray:
        return np.array(self.data.get(k, []), np.float64)

    @property
    def env_steps(self) -> np.ndarray:
        return (np.arange(len(self.data["episode_return"])) + 1) * self.steps_per_update

    def latest(self, k) -> float:
        """Mean over seeds of the last update in which an episode ended (NaN if none yet)."""
        a = self.array(k)
        finite = np.flatnonzero(np.isfinite(a).any(axis=1)) if a.size else []
        return float(np.nanmean(a[finite[-1]])) if len(finite) else float("nan")

    def write(self):
        if not self.owner:
            return
        steps = self.env_steps
        keys = [k for k in self.data if self.data[k]]
        json_data = {k: [[x if math.isfinite(x) else None for x in row] for row in self.data[k]] for k in keys}
        write_text_atomic(
            self.run_dir / METRICS_JSON,
            json.dumps({"env_steps": steps.tolist(), "per_seed": json_data, "progress": self.progress}),
        )
        lines = []
        header = ["update", "env_steps"] + [f"{k}_{s}" for k in keys for s in ("mean", "std")]
        arrays = {k: self.array(k) for k in keys}
        for i, n in enumerate(steps):
            row = [str(i + 1), str(int(n))]
            for k in keys:
                v = arrays[k][i] if i < len(arrays[k]) else np.array([])
                v = v[np.isfinite(v)]
                row += [f"{v.mean():.6g}", f"{v.std():.6g}"] if v.size else ["", ""]
            lines.append(row)
        buf = io.StringIO()
        csv.writer(buf).writerows([header] + lines)
        write_text_atomic(self.run_dir / METRICS_CSV, buf.getvalue())


def first_nonfinite_update(metrics: dict) -> int | None:
    """Index (within a chunk) of the first update whose ``nonfinite`` flag is set, or, for a
    trainer without that flag, whose losses are not finite; None when every update is finite."""
    flag = metrics.get("nonfinite")
    if flag is not None:
        bad = np.asarray(flag, bool)
    else:
        present = [np.asarray(metrics[k], np.float64) for k in LOSS_KEYS if k in metrics]
        if not present:
            return None
        bad = np.zeros(present[0].shape, bool)
        for a in present:
            bad |= ~np.isfinite(a)
    bad = bad.reshape(bad.shape[0], -1).any(axis=1) if bad.ndim > 1 else bad.reshape(-1)
    return int(np.argmax(bad)) if bad.any() else None
