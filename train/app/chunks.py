"""The chunks a run's updates are split into (`chunk_plan`) and the one compiled program that
runs every chunk (`ChunkProgram`, a part of `train.app.run.Run`)."""

from __future__ import annotations

import time

import jax
import numpy as np

from jaxenvs import _backend

from ..distributed import put_global, replicated, runner_shardings
from .timing import Background

__all__ = ["chunk_plan", "ChunkProgram"]


def chunk_plan(num_updates: int, num_chunks: int) -> list[int]:
    """The lengths of the chunks ``num_updates`` updates split into: exactly
    ``min(num_chunks, num_updates)`` chunks whose lengths differ by at most one (longer ones
    first), so ``--chunks N`` makes N calls (of one compiled program: see ``Run.compile_chunks``)."""
    n = max(1, min(num_chunks, num_updates))
    q, r = divmod(num_updates, n)
    return [q + 1] * r + [q] * (n - r)


class ChunkProgram:
    """`train.app.run.Run`'s chunk program: lowered for the runner's shapes (in the background while a
    new run initialises), compiled once, called once per chunk."""

    @staticmethod
    def _compile_label(plan: list[int]) -> str:
        return f"compiling the training program (chunks of {' or '.join(map(str, sorted(set(plan), reverse=True)))} update(s))"

    def compile_chunks(self, plan: list[int]):
        """One compiled program for every chunk: ``(runner, hparams, n) -> (runner, metrics)``
        runs ``n <= plan[0]`` updates. When the chunks differ in length (``--chunks`` not dividing
        the updates), the program's scan skips its last ``plan[0] - n`` steps with a
        ``lax.cond`` whose predicate is the same for every seed, so no update is computed twice and
        nothing is compiled twice; the skipped steps' metrics are dropped on the host. (Off a CPU
        the skipped steps are computed and a select drops them, `jaxenvs._backend.cond`: a GPU
        would copy the predicate to its host every update.)

        A new run started compiling it in the background (`start_new`); this waits for that
        program (the ``compile`` phase is the time waited) or, on a resume, compiles it here."""
        label = self._compile_label(plan)
        job = self.chunk_job
        self.chunk_job = None
        if job is not None and job[0] == plan:
            t0 = time.perf_counter()
            run = job[1].result()
            waited = time.perf_counter() - t0
            self.say.times["compile"] = self.say.times.get("compile", 0.0) + waited
            self.say(f"{label}: done in {job[1].duration:.1f}s (in the background; {waited:.1f}s waited for it)")
            return run
        with self.say.phase(label, "compile"):
            return self._start_chunk_program(plan, self.runner, background=False).result()

    def _start_chunk_program(self, plan: list[int], runner, background: bool = True):
        """The chunk program for ``runner`` (arrays or their shapes) as a `Background` job whose
        result is `_chunk_runner`'s function: traced and lowered here (Python) and compiled (XLA)
        in the background. ``background=False``: the caller waits for the job at once, inside its
        own compile phase, so no line announces it."""
        lowered = self._lower_chunk_program(plan, runner)  # Python's part here, XLA's in the background
        if background:
            self.say(f"{self._compile_label(plan)} (in the background) ...")
        return Background(lambda: self._chunk_runner(lowered.compile()), "jaxenvs-compile")

    def _lower_chunk_program(self, plan: list[int], runner):
        """`compile_chunks`'s program, traced and lowered for ``runner`` (arrays, or their shapes)."""
        import jax.numpy as jnp

        trainer, mesh, hp, length = self.trainer, self.mesh, self.hparams, plan[0]
        if len(set(plan)) == 1:
            def one_seed(r, h, n):
                return trainer.run_updates(r, h, num_updates=length)
        else:
            def one_seed(r, h, n):
                def update(r):
                    r, m = trainer.run_updates(r, h, num_updates=1)
                    return r, jax.tree.map(lambda x: x[0], m)

                shapes = jax.eval_shape(update, r)[1]

                def step(r, i):
                    skip = lambda r: (r, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))  # noqa: E731
                    return _backend.cond(i < n, update, skip, r)

                return jax.lax.scan(step, r, jnp.arange(length))

        body = jax.vmap(one_seed, in_axes=(0, None, None))
        if mesh is None:
            chunk = jax.jit(body)
        else:  # the runner keeps its layout; metrics come back whole on every device
            shardings = runner_shardings(runner, mesh)
            chunk = jax.jit(body, in_shardings=(shardings, replicated(mesh), replicated(mesh)),
                            out_shardings=(shardings, replicated(mesh)))
        n = np.int32(length) if mesh is None else put_global(np.int32(length), replicated(mesh))
        return chunk.lower(runner, hp, n)

    def _chunk_runner(self, compiled):
        """``run(runner, hparams, n)``: calls the compiled chunk program with ``n`` as its array."""
        mesh = self.mesh

        def run(runner, hp, k):
            k_arr = np.int32(k) if mesh is None else put_global(np.int32(k), replicated(mesh))
            return compiled(runner, hp, k_arr)

        return run
