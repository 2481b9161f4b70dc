"""``--ray-address`` / ``ray.address`` (``cook.runner.ray_connect``): a bad address, a port where nothing
listens, a server that is not Ray and a cluster that wants a token are each one ConfigError line,
in bounded time, before ``ray.init``. Fake gRPC servers stand in for a cluster; no Ray is started."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import grpc
import pytest

from cook.errors import ConfigError
from cook.runner.ray_connect import check_address, start_ray


@pytest.fixture(autouse=True)
def no_ray_yet(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """start_ray returns early when Ray is up (the suite's shared embedded Ray): pretend it is not, and
    give Ray's token loader an empty home and no token variables."""
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ray, "init", _no_init)
    yield
    # Ray's token loader caches what it read (a test's fake token and auth mode): an embedded Ray started later
    # in this process would otherwise carry them, and its first actor was cancelled (test_stored_frames)
    from ray import _raylet

    _raylet.AuthenticationTokenLoader.instance().reset_cache()


def _no_init(*args: object, **kwargs: object) -> None:
    raise AssertionError("ray.init must not be reached")


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("auto", None),
        ("10.0.0.5:6379", ("gcs", "10.0.0.5", 6379)),
        ("head-0.cluster.local:6380", ("gcs", "head-0.cluster.local", 6380)),
        ("[::1]:6379", ("gcs", "::1", 6379)),
        ("ray://head", ("client", "head", 10001)),
        ("ray://10.0.0.5:10002", ("client", "10.0.0.5", 10002)),
    ],
)
def test_addresses_cook_accepts(address: str, parsed: tuple | None) -> None:
    assert check_address(address) == parsed


@pytest.mark.parametrize(
    "address", ["bogus::address", "head", "head:", "head:0", "head:99999", "ray://", "ray://h:x", "http://h:1", "a b:1"]
)
def test_bad_addresses_are_one_line(address: str) -> None:
    with pytest.raises(ConfigError) as info:
        start_ray(address, 1)
    assert str(info.value) == (
        f"ray.address (--ray-address): {address!r} is not a Ray address; use auto, HOST:PORT or ray://HOST[:PORT]"
    )


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_nothing_listening_is_one_line_naming_the_address(scheme: str) -> None:
    address = f"{scheme}127.0.0.1:{_unused_port()}"
    with pytest.raises(ConfigError) as info:
        start_ray(address, 1, connect_timeout_s=5)
    message = str(info.value)
    assert message.startswith(f"ray.address (--ray-address): nothing answers at {address} (")
    assert "ray.connect_timeout_s=5" in message and "\n" not in message


def test_auto_is_resolved_then_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _unused_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=rf"nothing answers at auto \(.*:{port}\)"):
        start_ray("auto", 1, connect_timeout_s=5)


def test_the_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"ray\.connect_timeout_s: must be > 0"):
        start_ray("127.0.0.1:1", 1, connect_timeout_s=0)


@contextlib.contextmanager
def fake_server(code: grpc.StatusCode | None) -> Iterator[int]:
    """A gRPC server on 127.0.0.1 that answers every call with ``code`` (None: no such method)."""
    from concurrent import futures

    class Handler(grpc.GenericRpcHandler):
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
            if code is None:
                return None

            def fail(request: bytes, context: grpc.ServicerContext) -> bytes:
                context.abort(code, "Invalid or missing authentication token")
                return b""

            return grpc.unary_unary_rpc_method_handler(fail)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((Handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_cluster_with_token_auth_says_what_to_set(scheme: str) -> None:
    with fake_server(grpc.StatusCode.UNAUTHENTICATED) as port:
        address = f"{scheme}127.0.0.1:{port}"
        with pytest.raises(ConfigError) as info:
            start_ray(address, 1, connect_timeout_s=10)
    message = str(info.value)
    assert message.startswith(f"ray.address (--ray-address): the Ray cluster at {address} uses token authentication")
    assert "requires a token and none was sent (InvalidAuthToken)" in message
    assert "set RAY_AUTH_MODE=token" in message and "RAY_AUTH_TOKEN" in message and "\n" not in message


def test_a_refused_token_and_a_missing_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_server(grpc.StatusCode.UNAUTHENTICATED) as port:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        with pytest.raises(ConfigError, match="RAY_AUTH_MODE=token but this machine has no Ray token"):
            start_ray(f"127.0.0.1:{port}", 1, connect_timeout_s=10)
        monkeypatch.setenv("RAY_AUTH_TOKEN", "f" * 32)
        with pytest.raises(ConfigError, match=r"refused this machine's token \(InvalidAuthToken\)"):
            start_ray(f"127.0.0.1:{port}", 1, connect_timeout_s=10)


def test_a_server_that_is_not_ray() -> None:
    with fake_server(None) as port, pytest.raises(ConfigError) as info:
        start_ray(f"127.0.0.1:{port}", 1, connect_timeout_s=10)
    assert "accepts connections but is not a Ray GCS" in str(info.value) and "UNIMPLEMENTED" in str(info.value)


def test_a_silent_port_is_bounded_by_the_timeout() -> None:
    """A TCP server that accepts and never speaks: the probe gives up after ``connect_timeout_s``."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True)
    accepting.start()
    try:
        with pytest.raises(ConfigError, match="accepts connections but is not a Ray GCS"):
            start_ray(f"127.0.0.1:{listener.getsockname()[1]}", 1, connect_timeout_s=1)
    finally:
        for conn in held:
            conn.close()
        listener.close()


def test_auto_without_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray._private import services

    def none_found(address: str) -> str:
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(services, "canonicalize_bootstrap_address_or_die", none_found)
    with pytest.raises(ConfigError) as info:
        start_ray("auto", 1)
    assert str(info.value).startswith(
        "ray.address (--ray-address): auto found no one Ray cluster to join (Could not find any running Ray instance.)"
    )
