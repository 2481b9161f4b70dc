"""Start or join Ray for a run; a cluster that cannot be joined is one ``ConfigError`` line, in bounded time.

    start_ray(None, num_cpus)                          -> an embedded local Ray on 127.0.0.1 (capped CPUs,
                                                          object store; cook's settings, LOCAL_RAY_ENV)
                                                          with a watchdog (cook.runner.ray_watchdog)
    start_ray("HOST:PORT" | "auto" | "ray://HOST[:PORT]", num_cpus, connect_timeout_s)
                                                       -> joins that cluster, or raises ConfigError
    stop_ray()                                         -> ray.shutdown(); an embedded Ray's processes are gone

The embedded Ray's processes outlive a driver that dies without ``stop_ray`` (``kill -9``): its GCS
and raylet die with it, but Ray's agents wait a minute for the dead GCS. So each embedded Ray gets a
watchdog process, and the processes ``ray.init`` starts get a mark in their environment; when the
driver dies, the watchdog kills those and their descendants, and nothing else (``cook.runner.ray_watchdog``).

SPEC §2: an unreachable ``--ray-address`` exits 2 with a one-line reason after a bounded timeout.
Ray itself retries an unreachable GCS for minutes, ends a bad ``ray://`` in a traceback, and a
syntax error in a ``ValueError``; so before ``ray.init`` joins a cluster the address is checked here:

1. **Syntax** (``check_address``): ``auto``, ``HOST:PORT`` (``[v6 address]:PORT``) or
   ``ray://HOST[:PORT]`` (port 10001 by default); ``local`` is the embedded Ray. Anything else,
   ``bogus::address`` say, is a ConfigError.
2. **auto** is resolved as Ray resolves it (``RAY_ADDRESS``, else the last ``ray start`` on this
   machine); no cluster found is a ConfigError.
3. **The TCP port** must accept a connection within ``connect_timeout_s`` (``ray.connect_timeout_s``).
4. **Token authentication** (GCS addresses): one ``GetClusterId`` call, carrying the token exactly
   when ``ray.init`` would send one. ``UNAUTHENTICATED`` is Ray's ``InvalidAuthToken``: the cluster
   was started with token authentication (Ray 2.60's ``ray start`` turns it on whenever a token
   exists, e.g. ``~/.ray/auth_token``) and this process sends none, or the wrong one. ConfigError
   says what to set: ``RAY_AUTH_MODE=token`` and the cluster's token (``RAY_AUTH_TOKEN``,
   ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``). Without this, ``ray.init`` retries the refused
   calls and ends in a ``ConnectionError`` that does not say why.
5. **ray.init** runs with its GCS connect retries bounded by the timeout
   (``RAY_gcs_server_port_wait_time_s``, about one retry per second); its ``ConnectionError`` or
   ``AuthenticationError`` becomes a ConfigError naming the address.

A Ray that answers the probe but lacks an API used here (a different Ray version) is joined as
Ray would join it: the probe steps that need that API are skipped, never guessed.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Final

from cook.errors import ConfigError
from cook.runner import ray_watchdog
from cook.tokenize.tokenizer import SINGLE_THREADED

OBJECT_STORE_BYTES: Final = 512 * 2**20
DEFAULT_CONNECT_TIMEOUT_S: Final = 30.0
RAY_CLIENT_PORT: Final = 10001
AUTH_MODE_ENV: Final = "RAY_AUTH_MODE"
AUTH_HINT: Final = (
    f"set {AUTH_MODE_ENV}=token and the cluster's token in RAY_AUTH_TOKEN (or a file named by "
    "RAY_AUTH_TOKEN_PATH, default ~/.ray/auth_token; `ray get-auth-token` on the head node prints it), "
    f"or start the cluster with {AUTH_MODE_ENV}=disabled"
)
# The embedded local Ray is only cook's: no idle workers started ahead (the actors bring their own
# runtime env), and no task events or metrics for a dashboard that is not there. Given as Ray's
# ``RAY_<setting>`` environment variables (inherited by the processes ``ray.init`` starts), not as
# ``_system_config``: a Ray that no longer knows a setting ignores the variable, while an unknown
# ``_system_config`` key makes its GCS fail to start. A value already in the environment wins.
LOCAL_RAY_ENV: Final = {
    "RAY_prestart_worker_first_driver": "false",
    "RAY_enable_worker_prestart": "false",
    "RAY_task_events_report_interval_ms": "0",
    "RAY_enable_metrics_collection": "false",
    "RAY_event_stats": "false",
}
_HOST: Final = r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
_GCS_ADDRESS: Final = re.compile(_HOST + r":(?P<port>[0-9]{1,5})")
_CLIENT_ADDRESS: Final = re.compile(r"ray://" + _HOST + r"(?::(?P<port>[0-9]{1,5}))?")
_FORMS: Final = "auto, HOST:PORT or ray://HOST[:PORT]"
_watchdog: subprocess.Popen[bytes] | None = None  # of the embedded Ray this process started


def check_address(address: str) -> tuple[str, str, int] | None:
    """``(kind, host, port)`` of a cluster address (kind ``gcs`` or ``client``); None for ``auto``.

    >>> check_address("10.0.0.5:6379"), check_address("ray://head"), check_address("auto")
    (('gcs', '10.0.0.5', 6379), ('client', 'head', 10001), None)
    """
    if address == "auto":
        return None
    for kind, pattern, default_port in (("gcs", _GCS_ADDRESS, None), ("client", _CLIENT_ADDRESS, RAY_CLIENT_PORT)):
        match = pattern.fullmatch(address)
        if match is None:
            continue
        port = int(match["port"]) if match["port"] else default_port
        if port is None or not 0 < port < 65536:
            break
        return kind, match["host"].strip("[]"), port
    raise ConfigError(f"ray.address (--ray-address): {address!r} is not a Ray address; use {_FORMS}")


def start_ray(address: str | None, num_cpus: int, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> bool:
    """Start or join Ray; True when this call started it (and must shut it down).

    ``address`` None (or ``local``) starts the embedded local Ray with ``num_cpus``; a cluster address
    is checked first (module docstring) and joined, and ``num_cpus`` is the cluster's business.
    """
    import ray

    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": dict(SINGLE_THREADED)}  # every actor and task: no tokenizers thread pool
    if address is None or address == "local":
        for name, value in LOCAL_RAY_ENV.items():
            os.environ.setdefault(name, value)
        mark = f"{os.getpid()}-{secrets.token_hex(8)}"
        _start_watchdog(mark)
        with _environ(ray_watchdog.MARK_ENV, mark):  # inherited by every process this Ray starts
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
        return True
    if not connect_timeout_s > 0:
        raise ConfigError(f"ray.connect_timeout_s: must be > 0, got {connect_timeout_s!r}")
    parsed = check_address(address)
    kind, host, port = parsed if parsed is not None else ("gcs", *_resolve_auto())
    named = address if parsed is not None else f"auto ({_join(host, port)})"
    _probe_tcp(named, host, port, connect_timeout_s)
    _probe_auth(named, kind, host, port, connect_timeout_s, sends_token=_sends_token(auto=parsed is None))
    # ray.init retries the GCS about once a second RAY_gcs_server_port_wait_time_s times (default 20)
    with _environ("RAY_gcs_server_port_wait_time_s", str(max(1, math.ceil(connect_timeout_s)))):
        try:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, configure_logging=False)
        except ConnectionError as err:
            raise ConfigError(
                f"ray.address (--ray-address): cannot join the Ray cluster at {named} "
                f"within ray.connect_timeout_s={connect_timeout_s:g} ({_first_line(err)})"
            ) from None
        except getattr(ray.exceptions, "AuthenticationError", ()):  # RAY_AUTH_MODE=token and no token
            raise ConfigError(_no_token(named)) from None
    return True


def stop_ray() -> None:
    """``ray.shutdown()``; for an embedded Ray, then its watchdog kills any process of it still there."""
    import ray

    ray.shutdown()
    _stop_watchdog()


def _start_watchdog(mark: str) -> None:
    """The watchdog of the Ray marked ``mark``: its stdin is a pipe only this process writes to (the
    end here is close-on-exec), so it reads EOF when this process ends, however it ends. Linux only."""
    global _watchdog
    _stop_watchdog()  # of an earlier embedded Ray, shut down without stop_ray
    if not sys.platform.startswith("linux"):
        return
    _watchdog = subprocess.Popen(
        [sys.executable, "-I", ray_watchdog.__file__, mark, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop_watchdog() -> None:
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is not None:
        watchdog.communicate(ray_watchdog.STOP)  # it kills what is left of that Ray, quietly, and exits


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block, as it was after."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _no_token(named: str) -> str:
    return f"ray.address (--ray-address): {named}: {AUTH_MODE_ENV}=token but this machine has no Ray token; {AUTH_HINT}"


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def _resolve_auto() -> tuple[str, int]:
    """The cluster ``ray.init(address="auto")`` would join: RAY_ADDRESS, else the last ``ray start`` here."""
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die
    except ImportError:  # a Ray without it: nothing to probe; ray.init resolves (bounded by the wait below)
        return "", 0
    try:
        resolved = canonicalize_bootstrap_address_or_die("auto")
    except ConnectionError as err:
        raise ConfigError(
            f"ray.address (--ray-address): auto found no one Ray cluster to join ({_first_line(err)}); "
            f"start one with `ray start --head`, or give HOST:PORT or ray://HOST[:PORT]"
        ) from None
    except ValueError:
        raise ConfigError(
            f"ray.address (--ray-address): auto resolved to a bad address; set RAY_ADDRESS to one of {_FORMS}"
        ) from None
    parsed = check_address(resolved)  # Ray's own answer; a form cook does not know is named as such
    return (parsed[1], parsed[2]) if parsed is not None else ("", 0)


def _probe_tcp(named: str, host: str, port: int, timeout_s: float) -> None:
    if not host:
        return
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise ConfigError(
            f"ray.address (--ray-address): nothing answers at {named} ({why} within "
            f"ray.connect_timeout_s={timeout_s:g}); is the cluster up (`ray status`) and the port right?"
        ) from None


def _sends_token(auto: bool) -> bool:
    """Whether ``ray.init`` sends a token: RAY_AUTH_MODE=token, or (``auto`` only) unset with a token here."""
    mode = os.environ.get(AUTH_MODE_ENV, "").strip().lower()
    if mode == "token":
        return True
    return auto and not mode and _token_header() != ()


def _token_header() -> tuple[tuple[str, str], ...]:
    """The ``authorization`` metadata Ray would send: the token of RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
    ~/.ray/auth_token, loaded by Ray's own loader; () without one (or with a Ray that has no such loader)."""
    from ray import _raylet

    token_loader: Any = getattr(_raylet, "AuthenticationTokenLoader", None)
    if token_loader is None:  # a Ray without token authentication
        return ()
    loader = token_loader.instance()
    loader.reset_cache()  # the environment now, not when Ray first looked (the same as ray.init then reads)
    if not loader.has_token(ignore_auth_mode=True):
        return ()
    return tuple(loader.get_token_for_http_header().items())


def _probe_call(kind: str, channel: Any, timeout_s: float, metadata: Any) -> None:
    """The cheapest call of each server: GetClusterId on a GCS, a PING ClusterInfo on a Ray Client server."""
    import importlib

    if kind == "gcs":
        messages: Any = importlib.import_module("ray.core.generated.gcs_service_pb2")
        stubs: Any = importlib.import_module("ray.core.generated.gcs_service_pb2_grpc")
        gcs = stubs.NodeInfoGcsServiceStub(channel)
        gcs.GetClusterId(messages.GetClusterIdRequest(), timeout=timeout_s, metadata=metadata)
    else:
        messages = importlib.import_module("ray.core.generated.ray_client_pb2")
        stubs = importlib.import_module("ray.core.generated.ray_client_pb2_grpc")
        request = messages.ClusterInfoRequest(type=messages.ClusterInfoType.PING)
        stubs.RayletDriverStub(channel).ClusterInfo(request, timeout=timeout_s, metadata=metadata)


def _probe_auth(named: str, kind: str, host: str, port: int, timeout_s: float, sends_token: bool) -> None:
    """One cheap call as ``ray.init`` would make it; UNAUTHENTICATED is a ConfigError that says what to set."""
    if not host:
        return
    metadata = _token_header() if sends_token else ()
    if sends_token and not metadata:
        raise ConfigError(_no_token(named))
    try:
        import grpc
    except ImportError:  # Ray without gRPC: ray.init reports, bounded
        return
    try:
        with grpc.insecure_channel(_join(host, port)) as channel:
            _probe_call(kind, channel, timeout_s, metadata or None)
    except ImportError:  # a Ray without these stubs: ray.init reports, bounded
        return
    except grpc.RpcError as err:
        code = err.code() if hasattr(err, "code") else None
        if code == grpc.StatusCode.UNAUTHENTICATED:
            which = "refused this machine's token" if metadata else "requires a token and none was sent"
            raise ConfigError(
                f"ray.address (--ray-address): the Ray cluster at {named} uses token authentication and "
                f"{which} (InvalidAuthToken); {AUTH_HINT}"
            ) from None
        server = "Ray GCS (`ray start --port`)" if kind == "gcs" else "Ray Client server (`--ray-client-server-port`)"
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNIMPLEMENTED):
            raise ConfigError(
                f"ray.address (--ray-address): {named} accepts connections but is not a {server} that answers "
                f"within ray.connect_timeout_s={timeout_s:g} ({code.name})"
            ) from None
        # any other status: ray.init decides, bounded
