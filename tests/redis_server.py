"""A real redis-server for the remote cache tests: started on a free
loopback port, in a folder of the test's own, and stopped by its pid.

Skips (with the install line) where Debian's redis-server is missing.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, folder: Path, *config: str):
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.skip("redis-server not installed: sudo apt-get install redis-server (./dev deps does)")
        self.port = free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder),
             "--save", "", "--appendonly", "no", *config],
            stdout=open(folder / "redis.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"redis://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail(f"redis-server did not start: {(folder / 'redis.log').read_text()[-2000:]}")
                time.sleep(0.02)

    def client(self, username=None, password=None):
        from registry.remote.resp import Connection

        return Connection("127.0.0.1", self.port, 5.0, username, password)

    def pause(self) -> None:
        """Freezes the server: connections are accepted by the kernel, nothing answers."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


class CuttingProxy:
    """Relays TCP to `port`, and after `cut_after` bytes of replies runs
    `at_cut` and stops relaying (the client sees a stalled or closed stream):
    a server stopped in the middle of sending an artifact."""

    def __init__(self, port: int, cut_after: int, at_cut, close: bool):
        self.target, self.cut_after, self.at_cut, self.close = port, cut_after, at_cut, close
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}"
        self.cut = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src, dst, replies: bool) -> None:
        sent = 0
        try:
            while not self.cut.is_set():
                data = src.recv(4096)
                if not data:
                    return
                if replies and sent + len(data) >= self.cut_after:
                    dst.sendall(data[: self.cut_after - sent])
                    self.cut.set()
                    self.at_cut()
                    if self.close:
                        dst.close()
                    return
                dst.sendall(data)
                sent += len(data) if replies else 0
        except OSError:
            return

    def shutdown(self) -> None:
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
