"""Ray executor: CookWorker inside actors, results yielded in unit order with bounded in-flight work.

The Ray layer is only this: actors that each load one tokenizer and reuse it, a bounded set of
calls (``IN_FLIGHT_PER_ACTOR`` per actor, so driver memory stays flat however large the input), each
sent to the least busy actor, results handed on in input order, and crash handling.
``start_ray(None, ...)`` starts a local Ray on 127.0.0.1 with capped CPUs and object store; an
address joins a cluster (``auto``, ``ray://...``).

When an actor dies on a unit, Ray restarts the actor and the unit is cooked again with a trace
(``Attempt.trace``, under the output directory, so it must be on storage the driver can read). If
it dies again, the last traced record is the one that kills workers: it is rejected as
``worker_crash`` and the unit is cooked once more without it. A unit that keeps killing workers
with no record to blame fails the job after ``MAX_ATTEMPTS``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

from cook import format as fmt
from cook.config import PipelineConfig
from cook.runner.units import Attempt, Unit, UnitResult
from cook.runner.worker import FAULT_ENV, CookWorker

OBJECT_STORE_BYTES = 512 * 2**20
IN_FLIGHT_PER_ACTOR = 2
MAX_ATTEMPTS = 8
# The embedded local Ray is only cook's: no idle workers started ahead (the actors bring their own
# runtime env), and no task events or metrics for a dashboard that is not there. Given as Ray's
# ``RAY_<setting>`` environment variables (inherited by the processes ``ray.init`` starts), not as
# ``_system_config``: a Ray that no longer knows a setting ignores the variable, while an unknown
# ``_system_config`` key makes its GCS fail to start. A value already in the environment wins.
LOCAL_RAY_ENV = {
    "RAY_prestart_worker_first_driver": "false",
    "RAY_enable_worker_prestart": "false",
    "RAY_task_events_report_interval_ms": "0",
    "RAY_enable_metrics_collection": "false",
    "RAY_event_stats": "false",
}


def _worker_env() -> dict[str, str]:
    env = {"TOKENIZERS_PARALLELISM": "false"}
    if os.environ.get(FAULT_ENV):
        env[FAULT_ENV] = os.environ[FAULT_ENV]
    return env


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Start or join Ray; returns True when this call started it (and must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": _worker_env()}
    if address is None:
        for name, value in LOCAL_RAY_ENV.items():
            os.environ.setdefault(name, value)
        ray.init(
            address="local",
            num_cpus=num_cpus,
            object_store_memory=OBJECT_STORE_BYTES,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            runtime_env=runtime_env,
            log_to_driver=False,
            configure_logging=False,
        )
    else:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, configure_logging=False)
    return True


def _last_traced(path: str) -> int | None:
    try:
        with open(path) as handle:
            lines = handle.read().split()
    except FileNotFoundError:
        return None
    return int(lines[-1]) if lines else None


class RayExecutor:
    def __init__(self, config: PipelineConfig, address: str | None, num_actors: int) -> None:
        import ray

        cpus = max(os.cpu_count() or 1, math.ceil(num_actors * config.ray.cpus_per_actor))
        self._owns_ray = start_ray(address, cpus)
        actor_class = ray.remote(num_cpus=config.ray.cpus_per_actor, max_restarts=-1, max_task_retries=0)(CookWorker)
        options = actor_class.options(runtime_env={"env_vars": _worker_env()})
        self.actors: list[Any] = [options.remote(config) for _ in range(num_actors)]
        self._trace_dir = os.path.join(config.output.dir, fmt.PROGRESS_DIR)
        self._next_actor = 0

    def _submit(self, unit: Unit, attempt: Attempt, actor: int | None = None) -> Any:
        if actor is None:
            actor = self._next_actor % len(self.actors)
            self._next_actor += 1
        return self.actors[actor].cook_unit.remote(unit, attempt)

    def _collect(self, unit: Unit, attempt: Attempt, ref: Any) -> UnitResult:
        import ray
        from ray.exceptions import RayActorError, WorkerCrashedError

        for _ in range(MAX_ATTEMPTS):
            try:
                return ray.get(ref)
            except (RayActorError, WorkerCrashedError):
                if attempt.trace is None:
                    os.makedirs(self._trace_dir, exist_ok=True)
                    attempt = Attempt(os.path.join(self._trace_dir, f"trace-{unit.index:06d}"), attempt.crashed)
                else:
                    last = _last_traced(attempt.trace)
                    if last is not None and last not in attempt.crashed:
                        attempt = Attempt(attempt.trace, attempt.crashed | {last})
                ref = self._submit(unit, attempt)
        raise RuntimeError(f"unit {unit.index} ({unit.path}) kept killing workers after {MAX_ATTEMPTS} attempts")

    def map_units(self, units: Iterable[Unit]) -> Iterator[UnitResult]:
        """Cook ``units``; results come back in input order.

        Each free slot goes to the actor with the fewest calls outstanding (a faster actor takes more
        units, and the last units go to whichever actor is free), and finished results wait in a
        reorder buffer until their turn. Calls running plus results waiting never exceed
        ``IN_FLIGHT_PER_ACTOR`` per actor, so memory stays flat however large the input.
        """
        import ray

        todo = iter(enumerate(units))
        limit = IN_FLIGHT_PER_ACTOR * len(self.actors)
        outstanding = [0] * len(self.actors)
        running: dict[Any, tuple[int, Unit, int]] = {}  # ref -> (position, unit, actor)
        finished: dict[int, UnitResult] = {}
        turn = 0
        while True:
            while len(running) + len(finished) < limit and (item := next(todo, None)) is not None:
                actor = min(range(len(self.actors)), key=outstanding.__getitem__)
                outstanding[actor] += 1
                running[self._submit(item[1], Attempt(), actor)] = (item[0], item[1], actor)
            if turn in finished:
                yield finished.pop(turn)
                turn += 1
            elif running:
                (ref,), _ = ray.wait(list(running), num_returns=1)
                position, unit, actor = running.pop(ref)
                outstanding[actor] -= 1
                finished[position] = self._collect(unit, Attempt(), ref)
            else:
                return

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
