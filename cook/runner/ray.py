"""Ray executor: CookWorker inside actors, results yielded in unit order with bounded in-flight work.

The Ray layer is only this: actors that each load one tokenizer and reuse it, a bounded queue of
calls, and ordered collection. ``embedded=True`` starts a local Ray on 127.0.0.1 with capped CPUs
and object store; otherwise it joins ``address`` (``auto``, ``ray://...``).
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from cook.config import PipelineConfig
from cook.runner.units import Unit, UnitResult
from cook.runner.worker import CookWorker

OBJECT_STORE_BYTES = 512 * 2**20
IN_FLIGHT_PER_ACTOR = 2


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Start or join Ray; returns True when this call started it (and must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    env = {"env_vars": {"TOKENIZERS_PARALLELISM": "false"}}
    if address is None:
        ray.init(
            address="local",
            num_cpus=num_cpus,
            object_store_memory=OBJECT_STORE_BYTES,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            runtime_env=env,
            log_to_driver=False,
            configure_logging=False,
        )
    else:
        ray.init(address=address, runtime_env=env, log_to_driver=False, configure_logging=False)
    return True


class RayExecutor:
    def __init__(self, config: PipelineConfig, address: str | None, num_actors: int) -> None:
        import ray

        cpus = max(os.cpu_count() or 1, math.ceil(num_actors * config.ray.cpus_per_actor))
        self._owns_ray = start_ray(address, cpus)
        actor_class = ray.remote(num_cpus=config.ray.cpus_per_actor, max_restarts=2, max_task_retries=1)(
            CookWorker
        )
        self.actors: list[Any] = [actor_class.remote(config) for _ in range(num_actors)]

    def map_units(self, units: Iterable[Unit]) -> Iterator[UnitResult]:
        import ray

        pending: deque[Any] = deque()
        limit = IN_FLIGHT_PER_ACTOR * len(self.actors)
        for i, unit in enumerate(units):
            if len(pending) >= limit:
                yield ray.get(pending.popleft())
            pending.append(self.actors[i % len(self.actors)].cook_unit.remote(unit))
        while pending:
            yield ray.get(pending.popleft())

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
