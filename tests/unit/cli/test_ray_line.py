"""The Ray status line says "starting" only when cook starts Ray itself."""

from cook.cli.run_cmd import ray_line


def test_starting_only_for_an_embedded_ray() -> None:
    assert ray_line(None, 2) == "cook: starting Ray (2 actors)..."
    assert ray_line("local", 1) == "cook: starting Ray (1 actor)..."
    assert ray_line("10.0.0.5:6379", 3) == "cook: joining Ray at 10.0.0.5:6379 (3 actors)..."
    assert ray_line("auto", 2) == "cook: joining Ray at auto (2 actors)..."
