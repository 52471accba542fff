"""The learning curve's drawing, with numpy and matplotlib only (no JAX), in this process or in a
helper process that ``jaxenvs-train`` starts first thing (`CurveProcess`).

Why a helper: from its first trace to the start of training, a cold ``jaxenvs-train`` keeps both
cores of a small machine busy compiling its programs, and importing matplotlib in the same process
(about 0.8 CPU-seconds of Python, taking turns with the tracing on the GIL) delayed the training by
as much. The helper starts with the command, imports matplotlib at a lower priority on whatever
cores the run leaves idle, then waits for one figure: `CurveProcess.draw` sends it what to draw,
and it writes the file while the main process writes the GIF. The figure is the same bytes either way: the helper runs `draw_learning_curve`, the
function that draws in this process. When the helper cannot start, exits or fails, the figure is
drawn in this process, with a warning that says why.

A figure is described by plain data (`train.app.plotting.curve_figure` builds it from a run's
metrics): ``{"series": [(label, x, float[points, seeds], unit_range, metric name or None)],
"notes": [str], "bars": {metric: (op, level)}, "num_seeds": int, "title": str, "xmax": float}``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = ["draw_learning_curve", "CurveProcess", "LOG_RANGE", "COLUMNS"]

LOG_RANGE = 20.0  # a panel whose positive values span this factor or more gets a log y axis
COLUMNS = 3  # panels per row of the learning curve


def nan_fill_forward(x: np.ndarray) -> np.ndarray:
    """Carry the last finite value forward along axis 0 (updates in which no episode ended)."""
    x = np.array(x, np.float64)
    for i in range(1, len(x)):
        x[i] = np.where(np.isfinite(x[i]), x[i], x[i - 1])
    return x


def log_axis(values, unit_range: bool = False) -> bool:
    """Whether a panel's values are drawn on a log y axis: all finite ones are > 0 and the largest is
    at least `LOG_RANGE` times the smallest (an untrained GridWorld's length ratio of 76 next to the
    trained 1.05 would flatten the rest of the curve on a linear axis)."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    return bool(not unit_range and v.size and v.min() > 0 and v.max() >= LOG_RANGE * v.min())


def _panel(ax, env_steps, values, label: str, num_seeds: int, legend: bool = True):
    """Mean over seeds as a line; with several seeds, one labelled min-max band."""
    v = nan_fill_forward(values)
    with warnings.catch_warnings():  # updates before any episode ended are all-NaN: left blank
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, low, high = np.nanmean(v, axis=1), np.nanmin(v, axis=1), np.nanmax(v, axis=1)
    ax.plot(env_steps, mean, lw=1.5, marker="o" if len(env_steps) <= 30 else None, ms=3,
            label="mean over seeds" if num_seeds > 1 else None)
    if num_seeds > 1:
        ax.fill_between(env_steps, low, high, alpha=0.25, lw=0, label=f"min-max over {num_seeds} seeds")
        if legend:  # one legend for the figure: every panel draws seeds the same way
            ax.legend(loc="best", fontsize=7)
    ax.set_ylabel(label)
    return mean, low, high


def _import_matplotlib():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    return plt, EngFormatter, MaxNLocator


def draw_learning_curve(figure: dict, path: str | os.PathLike) -> Path:
    """Draw ``figure`` (the module docstring) into the PNG file ``path``, atomically (a temporary
    file beside it, then ``os.replace``): one panel per series, at most `COLUMNS` a row."""
    plt, EngFormatter, MaxNLocator = _import_matplotlib()
    series, notes, bars, num_seeds = figure["series"], figure["notes"], figure["bars"], figure["num_seeds"]
    title = figure["title"]
    cols = min(len(series), COLUMNS)
    rows = -(-len(series) // cols)
    width = max(4.2 * cols, 6.4)  # wide enough for the notes under a single panel
    fig, axes = plt.subplots(rows, cols, figsize=(width, 3.4 * rows + 0.3 + 0.2 * len(notes)), squeeze=False)
    for ax in axes.reshape(-1)[len(series):]:
        ax.set_visible(False)
    for i, (ax, (label, x, values, unit_range, name)) in enumerate(zip(axes.reshape(-1), series)):
        _panel(ax, x, values, label, num_seeds, legend=i == 0)
        if name in bars:  # the solved criterion's bar on this metric
            op, level = bars[name]
            ax.axhline(level, color="tab:green", linestyle="--", linewidth=1.2, label=f"solved: {op} {level:g}")
            ax.legend(fontsize=7, loc="best")
        ax.set_xlabel("env steps (per seed)")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.set_xlim(0, figure["xmax"])  # one x range on every panel
        ax.grid(alpha=0.3)
        if unit_range:
            ax.set_ylim(-0.03, 1.03)
        elif log_axis(values):
            ax.set_yscale("log")
            ax.set_ylabel(f"{label} (log scale)")
    seeds = f"{num_seeds} seed" + ("s: mean and min-max band" if num_seeds != 1 else "")
    fig.suptitle(f"{title} ({seeds})" if title else seeds)
    if notes:
        fig.text(0.5, 0.01, "\n".join(notes), ha="center", va="bottom", fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.055 * len(notes), 1, 1))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=100, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if tmp.exists():
            tmp.unlink()
    return path


# ---- the helper process -------------------------------------------------------------------------
# It is started as ``python -c _BOOT <this file>``: the file is loaded by its path, so the helper
# imports neither jaxenvs nor JAX; neither the folder it lies in nor the working directory (the
# ``""`` that ``-c`` puts first on the import path) is searched for modules. It runs at a lower
# priority (`NICE`, where the platform has ``os.nice``): its import then takes the cores the run
# leaves idle instead of slowing the tracing that the training program's compile waits for
# (measured: about 0.2 s of a cold run's wall time on 2 cores).
NICE = 10
_BOOT = (f"import os, sys; hasattr(os, 'nice') and os.nice({NICE}); "
         "sys.path[:1] = [] if sys.path[:1] == [''] else sys.path[:1]; import importlib.util as u; "
         "s = u.spec_from_file_location('jaxenvs_curve_drawing', sys.argv[1]); "
         "m = u.module_from_spec(s); s.loader.exec_module(m); m.serve()")


def serve() -> None:
    """The helper's body: import matplotlib, then read one ``(figure, path)`` from standard input
    (pickled), draw it, and answer ``ok`` on standard output. End of input before a figure (the
    command ended without one) exits quietly; a failure prints its traceback and exits 1."""
    _import_matplotlib()
    try:
        figure, path = pickle.load(sys.stdin.buffer)
    except EOFError:
        return
    t0 = time.perf_counter()
    draw_learning_curve(figure, path)
    sys.stdout.write(f"ok {time.perf_counter() - t0:.6f}\n")
    sys.stdout.flush()


class CurveProcess:
    """The helper process (the module docstring): `start` it first thing, `draw` once; `close`
    ends it when no figure will come (it also ends by itself when this process ends: its input
    closes)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self._sent = False

    @classmethod
    def start(cls) -> "CurveProcess | None":
        """A new helper, or None when it cannot be started (then the figure is drawn in this process)."""
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(Path(__file__).resolve())],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError:
            return None
        return cls(proc)

    def draw(self, figure: dict, path: str | os.PathLike) -> "_Drawing":
        """Send ``figure`` (from a thread: this one goes on); the returned object's ``result()``
        waits for the file and returns its path. Where the helper is gone or fails, ``result()``
        draws the figure in this process instead and warns (on standard error) why."""
        if self._sent:
            raise RuntimeError("CurveProcess.draw: a helper draws one figure")
        self._sent = True
        return _Drawing(self.proc, figure, Path(path))

    def close(self) -> None:
        """End the helper unless it was given a figure (that one it finishes)."""
        if self._sent:
            return
        self._sent = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


class _Drawing:
    """A figure sent to the helper; ``duration``: the seconds its drawing took (known after `result`)."""

    def __init__(self, proc: subprocess.Popen, figure: dict, path: Path):
        self.proc, self.figure, self.path = proc, figure, path
        self.duration: float | None = None
        self._answer: tuple[bytes, bytes] = (b"", b"")
        self._thread = threading.Thread(target=self._send, args=(pickle.dumps((figure, str(path))),),
                                        name="jaxenvs-curve", daemon=True)
        self._thread.start()

    def _send(self, payload: bytes) -> None:
        try:
            self._answer = self.proc.communicate(payload)
        except OSError as e:  # it exited before reading (a broken pipe): result() draws here
            self.proc.kill()
            self.proc.wait()
            self._answer = (b"", str(e).encode())

    def result(self) -> Path:
        self._thread.join()
        out, err = self._answer
        answer = out.decode(errors="replace").split()
        if self.proc.returncode == 0 and len(answer) == 2 and answer[0] == "ok":
            self.duration = float(answer[1])
            return self.path
        lines = err.decode(errors="replace").strip().splitlines()
        why = lines[-1] if lines else f"exit status {self.proc.returncode}"
        print(f"warning: the learning-curve process failed ({why}); drawing {self.path.name} in this one", file=sys.stderr)
        t0 = time.perf_counter()
        try:
            return draw_learning_curve(self.figure, self.path)
        finally:
            self.duration = time.perf_counter() - t0
