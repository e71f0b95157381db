"""nginx as deploy/nginx/ renders it, in front of a gateway, as a process of the test: the one way
the tests run the edge (tests/contract/test_deploy_nginx.py before a stand-in gateway,
tests/e2e/test_nginx_mesh.py before the mesh's)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragmesh_bench.harness import NotServing, serve_on_free_port
from ragmesh_cli.mesh.lifecycle import stop_process

ROOT = Path(__file__).resolve().parents[1]


def render_config() -> Any:
    """deploy/nginx/render_config.py as a module (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location("render_config", ROOT / "deploy/nginx/render_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def running_edge(binary: str, work: Path, *, upstream: str, static_root: Path) -> Iterator[str]:
    """nginx on a free loopback port proxying to ``upstream`` (host:port), serving ``static_root``;
    yields its base URL once /nginx-health answers from it. Its output is ``work/nginx.out``."""
    log = work / "nginx.out"
    # As root, workers would drop to `nobody`, who cannot read pytest's private temp folders.
    directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")

    def start(port: int) -> subprocess.Popen:
        conf = render_config().render(
            work / f"conf-{port}",
            GATEWAY_UPSTREAM=upstream,
            GATEWAY_UPSTREAM_OPTIONS="",
            NGINX_RESOLVER="127.0.0.1",
            NGINX_LISTEN=f"127.0.0.1:{port}",
            NGINX_STATIC_ROOT=str(static_root),
        )
        with log.open("ab") as out:
            return subprocess.Popen(
                [binary, "-p", f"{conf.parent}/", "-c", str(conf), "-e", "stderr", "-g", directives],
                stdout=out, stderr=subprocess.STDOUT,
            )

    try:
        port, process = serve_on_free_port(start, "/nginx-health", timeout=15)
    except NotServing as exc:
        pytest.fail(f"nginx did not start: {exc}\n{log.read_text(errors='replace')}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process.pid, timeout=10.0)
        process.wait()
