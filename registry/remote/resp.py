"""A minimal Redis client: RESP2 over one TCP socket, every wait bounded.

The remote cache needs a handful of commands (HMGET, HSET, SADD, MULTI/EXEC,
EXISTS, SMEMBERS, GET, SET, AUTH, SELECT, PING) and a hard bound on every
network wait, so that an unreachable or stopped server costs a `get` at most
`timeout` seconds per wait. This module is that and nothing more: no pools,
no retries (the caller decides), no RESP3. It imports in well under a
millisecond, which a fresh process's first `get` notices.
"""
from __future__ import annotations

import socket


class RedisError(Exception):
    """The server answered with an error (e.g. NOPERM, WRONGPASS, OOM)."""


class ProtocolError(ConnectionError):
    """The reply was not RESP2: not a Redis server, or the stream is broken."""


class Connection:
    """One connection. Any OSError (timeout, refused, reset) or ProtocolError
    leaves it unusable: close it and connect again."""

    def __init__(self, host: str, port: int, timeout: float,
                 username: str | None = None, password: str | None = None, db: int = 0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)  # every recv/send below waits at most this long
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        try:
            if password is not None:
                self.command(*(("AUTH", username, password) if username else ("AUTH", password)))
            if db:
                self.command("SELECT", str(db))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for closer in (self.reader.close, self.sock.close):
            try:
                closer()
            except OSError:
                pass

    def command(self, *args):
        """One command's reply; raises RedisError when the server refuses it."""
        reply = self.pipeline([args])[0]
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def pipeline(self, commands: list[tuple]) -> list:
        """Sends every command, then reads every reply in order (one round
        trip). A refused command's reply is a RedisError instance, not raised."""
        self.sock.sendall(b"".join(encode(c) for c in commands))
        return [self._read() for _ in commands]

    def _read(self):
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ProtocolError("connection closed mid-reply" if not line else f"unterminated reply {line[:40]!r}")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return body.decode()
        if kind == b"-":
            return RedisError(body.decode(errors="replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            size = int(body)
            if size < 0:
                return None
            data = self.reader.read(size + 2)
            if len(data) != size + 2:
                raise ProtocolError(f"connection closed after {len(data)} of {size} bytes of a reply")
            return data[:-2]
        if kind == b"*":
            count = int(body)
            return None if count < 0 else [self._read() for _ in range(count)]
        raise ProtocolError(f"unexpected reply {line[:40]!r}: is this a Redis server?")


def encode(args: tuple) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts += [b"$%d\r\n" % len(data), data, b"\r\n"]
    return b"".join(parts)
