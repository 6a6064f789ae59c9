"""The team's shared cache in Redis (REGISTRY_REMOTE_CACHE): fetch what a
teammate already built, share what this process builds.

Where things live in Redis, and why no reader sees a partial upload:
core/remote_layout.h. What arrives is verified by the core before anything
can load it (CacheStore.adopt: the record's format and key, the artifact's
size and XXH3); a rejected copy is reported in status().notes and the
artifact is built locally, then stored again, replacing the bad copy.

The remote never breaks a `get`: every method here returns normally. A
network failure (refused, reset, no answer within REGISTRY_REMOTE_TIMEOUT)
warns once, naming the server and the reason, and the remote is skipped for
RETRY_AFTER_S before it is tried again; the get goes on with the local cache
and local builds. A refused command (a read-only user storing) warns once
and stops only what was refused.

Trust: whoever can write to the Redis can supply code that every reader's
process loads and runs. See README.md ("A team's shared cache").
"""
from __future__ import annotations

import os
import threading
import urllib.parse
import warnings
from pathlib import Path

from registry import _core, knobs
from registry.errors import SettingError

RETRY_AFTER_S = 30.0
# A build claim expires this long after its builder last renewed it (every
# third of it), so a builder that dies holds others back for seconds only.
CLAIM_TTL_S = 15.0
CLAIM_POLL_S = 0.2

# Every remote fetch this process made, as (key, outcome) with outcome one of
# "hit", "miss", "rejected": tests count them across processes.
fetches_run: list[tuple[str, str]] = []


class RemoteURL:
    """redis://[user:password@]host[:port][/db], the form ccache reads too.
    One name before the @ is a password (Redis's default user)."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "redis" or not parts.hostname:
            raise SettingError(f"REGISTRY_REMOTE_CACHE must look like redis://[user:password@]host[:port][/db], "
                             f"not {_masked(url)!r}")
        try:
            self.port = parts.port or 6379
            db = parts.path.strip("/")
            self.db = int(db) if db else 0
        except ValueError:
            raise ValueError(f"REGISTRY_REMOTE_CACHE has a bad port or database number: {_masked(url)!r}") from None
        self.url, self.host = url, parts.hostname
        user = urllib.parse.unquote(parts.username) if parts.username is not None else None
        password = urllib.parse.unquote(parts.password) if parts.password is not None else None
        self.username, self.password = (None, user) if password is None and user else (user, password)
        # Shown in warnings and the CLI: never the password.
        self.display = f"redis://{self.host}:{self.port}/{self.db}"


def _masked(url: str) -> str:
    head, at, tail = url.rpartition("@")
    return f"{head.split('//', 1)[0]}//***@{tail}" if at else url


class RemoteCache:
    """One remote cache, shared by this process's threads."""

    def __init__(self, url: str, mode: str = "read-write", timeout: float = 1.0):
        self.where = RemoteURL(url)
        self.writable, self.timeout = mode == "read-write", timeout
        self.counts = {"hit": 0, "miss": 0, "rejected": 0, "stored": 0}
        self.problem = ""  # why the remote is being skipped now, or ""
        self._lock = threading.Lock()
        self._conn, self._pid = None, None
        self._down_until = 0.0
        self._warned: set[str] = set()
        self._present: set[str] = set()  # keys known to be stored remotely
        self._rejected: set[str] = set()  # keys whose stored copy this process rejected

    @property
    def display(self) -> str:
        return self.where.display

    def ccache_storage(self) -> str:
        """ccache's remote_storage value for the same server (its timeouts in ms)."""
        ms = max(1, int(self.timeout * 1000))
        return (f"{self.where.url}|connect-timeout={ms}|operation-timeout={ms}"
                + ("" if self.writable else "|read-only"))

    def available(self) -> bool:
        """False while the remote is being skipped after a failure."""
        import time

        return time.monotonic() >= self._down_until

    # ---- objects --------------------------------------------------------

    def fetch(self, store, key_hex: str):
        """(entry, note): the entry adopted into `store`, or None with a note
        saying why a stored copy was rejected ("" for a plain miss)."""
        reply = self._run("fetch", lambda c: c.command("HMGET", _core.remote_object_key(key_hex), "record", "artifact"))
        if reply is None:
            return None, ""
        record, artifact = reply
        if record is None:
            return self._count(key_hex, "miss"), ""
        adopted = store.adopt(key_hex, record, artifact or b"")
        if adopted.entry is None:
            self._rejected.add(key_hex)  # rebuilt here, and stored again over it
            self._count(key_hex, "rejected")
            return None, f"copy in the remote cache {self.display} rejected: {adopted.miss_reason}; rebuilt here"
        self._count(key_hex, "hit")
        self._present.add(key_hex)
        return adopted.entry, ""

    def store(self, entry) -> bool:
        """Stores a published entry (record and artifact in one transaction)."""
        if not self.writable:
            return False
        folder = Path(entry.dir)
        try:
            record, artifact = (folder / "entry.toml").read_bytes(), (folder / entry.artifact).read_bytes()
        except OSError:
            return False  # evicted or removed meanwhile: nothing to share
        commands = [("MULTI",),
                    ("HSET", _core.remote_object_key(entry.key), "record", record, "artifact", artifact),
                    ("SADD", _core.remote_kernel_key(entry.kernel), entry.key),
                    ("EXEC",)]
        replies = self._run("store", lambda c: c.pipeline(commands))
        if replies is None:
            return False
        refused = next((r for r in replies if isinstance(r, Exception)), None)
        if refused is not None or replies[-1] is None:
            self._refused("store", refused or "the transaction was aborted")
            return False
        self.counts["stored"] += 1
        self._present.add(entry.key)
        return True

    def share(self, entries) -> None:
        """Stores those of `entries` (local hits) that the remote lacks, so a
        kernel built before the remote was configured still reaches the team."""
        unknown = [e for e in entries if e.key not in self._present]
        if not self.writable or not unknown:
            return
        found = self._run("check", lambda c: c.pipeline([("EXISTS", _core.remote_object_key(e.key)) for e in unknown]))
        for entry, exists in zip(unknown, found or []):
            if exists == 1:
                self._present.add(entry.key)
            elif exists == 0 and not self.store(entry):
                return

    def list_kernel(self, kernel: str) -> list | None:
        """Every entry stored for `kernel` (_core.Entry, dir left empty), or
        None when the remote cannot be reached."""
        def listing(conn):
            keys = sorted(k.decode() for k in conn.command("SMEMBERS", _core.remote_kernel_key(kernel)))
            records = conn.pipeline([("HGET", _core.remote_object_key(k), "record") for k in keys]) if keys else []
            return list(zip(keys, records))

        rows = self._run("list", listing)
        if rows is None:
            return None
        entries = []
        for key, record in rows:
            if isinstance(record, bytes):
                try:
                    entries.append(_core.parse_entry(record.decode()))
                except (ValueError, RuntimeError, UnicodeDecodeError):
                    continue  # unusable: a fetch would reject it too
        return entries

    # ---- one build per team ---------------------------------------------

    def wait_or_claim(self, store, claim_hex: str, deadline: float, find):
        """(entry, note, claim) for a key missing here and in the remote.

        The claim is taken on `claim_hex`, the key known before building;
        `find()` gives the artifact key to look for in the remote (None while
        no record names one: a kernel library's key can depend on what its
        builder's compiler reported).

        Claims the build when nobody else is building the key (claim is then
        a Claim to hold while building and release after storing). When a
        process on another machine holds the claim, waits for its result
        (entry set) until it appears, the claim goes (its builder failed or
        died: claims then) or `deadline` passes. (None, "", None) when the
        remote is unavailable or this process may not claim: build here."""
        import socket
        import time

        claim_key = _core.remote_claim_key(claim_hex)
        holder = f"{socket.gethostname()} pid={os.getpid()}"

        def stored() -> str | None:  # the key of a copy this process has not already rejected
            key_hex = find()
            if key_hex is None or key_hex in self._rejected:
                return None
            exists = self._run("fetch", lambda c: c.command("EXISTS", _core.remote_object_key(key_hex)))
            return key_hex if exists == 1 else None

        while True:
            if self.writable:
                # SET NX answers nil when the claim is taken (None: unavailable).
                answer = self._run("claim", lambda c: c.command("SET", claim_key, holder, "NX", "PX",
                                                                str(int(CLAIM_TTL_S * 1000))) or "taken")
                if answer == "OK":
                    # A builder stores before it unclaims: if one just finished,
                    # its object is there now.
                    key_hex = stored()
                    if key_hex is None:
                        return None, "", Claim(self, claim_key)
                    self.unclaim(claim_key)
                    entry, note = self.fetch(store, key_hex)
                    return entry, note, None
            else:
                answer = self._run("fetch", lambda c: c.command("EXISTS", claim_key))
                if answer == 0:
                    return None, "", None
            if answer is None or time.monotonic() > deadline:
                return None, "", None
            time.sleep(CLAIM_POLL_S)  # someone else builds it
            key_hex = stored()
            if key_hex is not None:
                entry, note = self.fetch(store, key_hex)
                return entry, note, None

    def renew(self, claim_key: str) -> None:
        self._run("claim", lambda c: c.command("PEXPIRE", claim_key, str(int(CLAIM_TTL_S * 1000))))

    def unclaim(self, claim_key: str) -> None:
        self._run("claim", lambda c: c.command("DEL", claim_key))

    # ---- small records (e.g. a dependency record) ------------------------

    def get_file(self, relative_path: str) -> bytes | None:
        """A small cache record stored by put_file, or None. The caller
        verifies it as it would the same file read from the local disk."""
        reply = self._run("fetch", lambda c: c.command("GET", _core.remote_file_key(relative_path)))
        return reply if isinstance(reply, bytes) else None

    def put_file(self, relative_path: str, data: bytes) -> bool:
        if not self.writable:
            return False
        key = _core.remote_file_key(relative_path)
        return self._run("store", lambda c: c.command("SET", key, data)) == "OK"

    def ping(self) -> str:
        """"" when the server answers, else why not (for `remote info`)."""
        self._down_until = 0.0
        return "" if self._run("ping", lambda c: c.command("PING")) == "PONG" else self.problem or "no answer"

    # ---- plumbing ---------------------------------------------------------

    def _count(self, key_hex: str, outcome: str):
        self.counts[outcome] += 1
        fetches_run.append((key_hex, outcome))
        return None

    def _run(self, what: str, action):
        """action(connection)'s result, or None when the remote is down or
        fails now (then it warns once and is skipped for a while)."""
        import time

        from registry.remote.resp import Connection, RedisError

        if not self.available():
            return None
        with self._lock:
            try:
                if self._conn is None or self._pid != os.getpid():
                    w = self.where
                    self._conn = Connection(w.host, w.port, self.timeout, w.username, w.password, w.db)
                    self._pid = os.getpid()
                result = action(self._conn)
                self.problem = ""
                return result
            except RedisError as refused:
                if what in ("store", "check", "claim"):
                    self._refused(what, refused)
                    return None
                self._drop()
                self._down(f"the server refused: {refused}")
            except OSError as error:  # refused, reset, timed out, protocol (ConnectionError)
                self._drop()
                self._down(_reason(error, self.timeout))
            self._down_until = time.monotonic() + RETRY_AFTER_S
            return None

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def _down(self, reason: str) -> None:
        self.problem = f"remote cache {self.display} unavailable ({reason})"
        self._warn_once("down", f"{self.problem}: going on with the local cache and local builds; "
                                f"trying it again in {RETRY_AFTER_S:.0f} s")

    def _refused(self, what: str, why) -> None:
        self.writable = False
        self._warn_once(what, f"remote cache {self.display} refused to store ({why}); this process "
                              f"only reads from it now. Set REGISTRY_REMOTE_CACHE_MODE=read-only if "
                              f"this user may not write.")

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, RuntimeWarning, stacklevel=4)


class Claim:
    """This process builds a key for the team: renewed in the background
    until released (after the build is stored, or failed)."""

    def __init__(self, team: RemoteCache, claim_key: str):
        self.team, self.key = team, claim_key
        self.done = threading.Event()
        threading.Thread(target=self._renew, name="kreg-claim", daemon=True).start()

    def _renew(self) -> None:
        while not self.done.wait(CLAIM_TTL_S / 3):
            self.team.renew(self.key)

    def release(self) -> None:
        self.done.set()
        self.team.unclaim(self.key)


def _reason(error: OSError, timeout: float) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return str(error) or type(error).__name__


_current: tuple[tuple, RemoteCache | None] | None = None
_current_lock = threading.Lock()


def current() -> RemoteCache | None:
    """The remote cache the knobs name, or None; one per process and setting."""
    global _current
    url = knobs.remote_cache()
    if url is None:
        return None
    setting = (url, knobs.remote_mode(), knobs.remote_timeout())
    with _current_lock:
        if _current is None or _current[0] != setting:
            _current = (setting, RemoteCache(*setting))
        return _current[1]
