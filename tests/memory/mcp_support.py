"""Helpers for MCP tests that run real server processes: free ports, waiting on them, client sessions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(home: Path) -> dict:
    """The environment of a child process using the data dir `home`."""
    env = dict(os.environ, MIRADOR_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def start_server(home: Path, port: int, log_path: Path) -> subprocess.Popen:
    """`mirador serve --port PORT` in a child process; returns once the port accepts connections."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process by stop_server
    proc = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "serve", "--port", str(port)], cwd=ROOT,
                            env=env_for(home), stdout=log, stderr=subprocess.STDOUT)
    proc._log = log  # type: ignore[attr-defined]
    wait_port(port, proc, log_path)
    return proc


def wait_port(port: int, proc: subprocess.Popen, log_path: Path, timeout: float = 240.0) -> None:
    """Wait (bounded) until something accepts connections on 127.0.0.1:port; fail early if proc died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{log_path.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)  # polling a condition, not waiting for a fixed time
    raise AssertionError(f"server did not listen on {port} within {timeout}s:\n{log_path.read_text(errors='replace')}")


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server we started (by its own handle) and wait for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    proc._log.close()  # type: ignore[attr-defined]


@asynccontextmanager
async def http_session(url: str, token: str | None):
    """An initialized MCP ClientSession over streamable HTTP with a bearer token (the initialize handshake)."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def connected(server):
    """An in-process client of `server`, connected as 1.x's create_connected_server_and_client_session did:
    over memory streams, with the initialize handshake."""
    from mcp import Client

    return Client(server, mode="legacy")


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


def call(store, principal, steps):
    """Run async steps against a fresh in-process MCP server with a real client session (JSON-RPC over memory
    streams, the initialize handshake); returns what the steps return."""
    import anyio

    from memory.mcp.server import build_server

    server = build_server(lambda: store, principal)

    async def main():
        async with connected(server) as client:
            return await steps(client)

    return anyio.run(main)


def snapshot(store) -> dict:
    """Every table's row count and version: any write, however small, moves one of them."""
    return store.tables_state()
