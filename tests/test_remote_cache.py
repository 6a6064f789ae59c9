"""A team shares builds through one Redis (REGISTRY_REMOTE_CACHE).

Two "machines" are two checkouts at different paths, each with its own cache
root (inside the checkout, the default layout) and its own ccache folder;
each `get` runs in a fresh process, as a teammate's notebook would. The
Redis is a real redis-server on a loopback port (tests/redis_server.py).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from axpy_edits import include_extra_through_a_macro
from conftest import CHECKOUT, KernelCopy
from redis_server import CuttingProxy, RedisServer, free_port, redis_server  # noqa: F401 (fixture)
from reliability_helpers import Child, child_env, figure, seed_cache
from reliability_helpers import binding_seed  # noqa: F401 (fixture)

KERNEL = "axpy_team"

CHILD = """
import warnings
from registry.remote import team_cache
name = os.environ["KERNEL"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = time.perf_counter()
    result = check(name)
    result["seconds"] = time.perf_counter() - start
status = registry.status(name, device="cpu")
result.update(fetches=[list(f) for f in team_cache.fetches_run], remote=status.remote, sources=status.sources,
              ccache=status.ccache, ccache_remote=status.ccache_remote, text=str(status),
              warnings=[str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)])
say(**result)
"""

# A child says it is ready, then waits for the file $GO: the test releases
# every child at one moment, after all of them have started.
WAIT_FOR_GO = """
say(ready=os.getpid())
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.001)
"""


def _released_together(children: list[Child], go: Path) -> list[dict]:
    """What each child (started with WAIT_FOR_GO) says once all are released;
    every child must exit cleanly, and none outlives the test."""
    try:
        for child in children:
            child.message(timeout=180)
        go.touch()
        results = [child.message(timeout=300) for child in children]
        for child in children:
            assert child.finish() == 0, child.stderr_text()
    finally:
        for child in children:
            child.kill_group()
    return results


class Machine:
    """A checkout at `root/<path>` with its kernels, its cache inside it and
    its own ccache folder: what a teammate's machine has."""

    def __init__(self, root: Path, path: str, url: str | None, seed: Path | None = None):
        self.checkout = root / path
        self.kernels, self.cache = self.checkout / "kernels", self.checkout / "cache"
        self.ccache_dir, self.url = root / path.replace("/", "_") / "ccache", url
        self.kernels.mkdir(parents=True)
        self.copy = KernelCopy(self.kernels, "axpy", KERNEL)
        if seed is not None:
            seed_cache(self.cache, seed)  # the binding, built once per test session

    def env(self, **extra: str) -> dict[str, str]:
        settings = {"KERNEL": KERNEL, "CCACHE_DIR": str(self.ccache_dir), "REGISTRY_REMOTE_TIMEOUT": "0.5",
                    **({"REGISTRY_REMOTE_CACHE": self.url} if self.url else {}), **extra}
        return child_env(self.cache, self.kernels, **settings)

    def get(self, timeout: float = 300, **extra: str) -> dict:
        child = Child(CHILD, self.env(**extra))
        result = child.message(timeout=timeout)
        assert child.finish() == 0, child.stderr_text()
        return result

    def cli(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "registry", *args], env=self.env(**extra), cwd=str(CHECKOUT),
                              capture_output=True, text=True, timeout=120)


def _lib_builds(result: dict) -> int:
    return sum(b == [KERNEL, "kernel-lib"] for b in result["builds"])


@pytest.fixture
def first_machine(tmp_path, redis_server, binding_seed):
    """Alice's machine has built the kernel; the Redis holds its library and binding."""
    alice = Machine(tmp_path, "alice/work/project", redis_server.url, seed=binding_seed)
    result = alice.get()
    assert result["ok"] and result["outcome"] == "compiled", result
    assert result["remote"]["stored"] == 2, result  # the library built, the binding shared
    return alice


def test_second_machine_gets_the_kernel_with_no_compile(tmp_path, redis_server, first_machine):
    bob = Machine(tmp_path, "b/deeper/checkout-two", redis_server.url)
    result = bob.get()
    assert result["ok"], result
    assert result["outcome"] == "remote", result
    assert result["builds"] == [], result  # 0 compiles, so 0 compiler misses
    assert result["sources"] == {"lib": "remote", "binding": "remote"}, result
    assert sorted(o for _, o in result["fetches"]) == ["hit", "hit"], result
    assert "remote cache redis://127.0.0.1" in result["text"] and "2 hits, 0 misses" in result["text"], result["text"]
    again = bob.get()  # now in Bob's own cache: no remote traffic at all
    assert again["ok"] and again["outcome"] == "cache" and again["fetches"] == [], again
    figure(f"remote: a teammate's first get of a kernel built elsewhere took {result['seconds']:.2f} s "
           f"(fresh process, empty local cache, after import torch); 0 compiles")


def test_other_checkout_compiles_through_ccache_remote_storage(tmp_path, redis_server, first_machine):
    # Carol's manifest differs in a comment only: a new library key (no
    # artifact to fetch), but the same compile, which ccache serves from Redis
    # although her checkout sits elsewhere and her ccache folder is empty.
    carol = Machine(tmp_path, "carol/x/y/proj", redis_server.url)
    carol.copy.edit("kernel.toml", 'description = "out = alpha * x + y"', 'description = "carol\'s axpy"')
    result = carol.get()
    assert result["ok"] and result["outcome"] == "compiled", result
    assert _lib_builds(result) == 1 and result["sources"]["binding"] == "remote", result
    hits, misses = result["ccache"]
    assert misses == 0 and hits >= 1, result
    assert result["ccache_remote"][0] >= 1, result


def test_flipped_byte_in_the_remote_artifact_is_detected_and_rebuilt(tmp_path, redis_server, first_machine):
    from registry import _core

    client = redis_server.client()
    libs = [k.decode() for k in client.command("SMEMBERS", _core.remote_kernel_key(KERNEL))]
    assert len(libs) == 1, libs
    lib_key = libs[0]
    artifact = bytearray(client.command("HGET", _core.remote_object_key(lib_key), "artifact"))
    artifact[len(artifact) // 2] ^= 0x40
    client.command("HSET", _core.remote_object_key(lib_key), "artifact", bytes(artifact))

    bob = Machine(tmp_path, "bob/checkout", redis_server.url)
    result = bob.get()
    assert result["ok"] and result["outcome"] == "compiled", result
    assert _lib_builds(result) == 1, result
    assert any("does not match the XXH3 digest" in n and "remote cache" in n for n in result["notes"]), result
    assert ["rejected"] == [o for k, o in result["fetches"] if k == lib_key], result
    assert _core.CacheStore(str(bob.cache)).lookup(lib_key).entry is not None  # the local rebuild

    # Bob's rebuild replaced the bad copy: the next teammate gets a good one.
    dave = Machine(tmp_path, "dave/checkout", redis_server.url)
    fixed = dave.get()
    assert fixed["ok"] and fixed["outcome"] == "remote" and fixed["builds"] == [], fixed


@pytest.mark.parametrize("how", ["frozen", "killed"])
def test_redis_stopped_in_the_middle_of_a_get_falls_back(tmp_path, redis_server, first_machine, binding_seed, how):
    # The proxy passes 8 KiB of the library's 15 KiB, then the server stops:
    # frozen (SIGSTOP: the stream stalls) or killed (the stream is cut).
    def stop():
        (redis_server.pause if how == "frozen" else redis_server.stop)()

    proxy = CuttingProxy(redis_server.port, 8 * 1024, stop, close=how == "killed")
    try:
        bob = Machine(tmp_path, "bob/checkout", proxy.url, seed=binding_seed)  # only the library to fetch
        start = time.monotonic()
        result = bob.get(timeout=240)
        elapsed = time.monotonic() - start
    finally:
        proxy.shutdown()
        redis_server.resume() if how == "frozen" else None
    assert proxy.cut.is_set()
    assert result["seconds"] < 60, result  # bounded: timeouts, then a local build
    assert result["ok"] and result["outcome"] == "compiled", result
    assert [w for w in result["warnings"] if f"remote cache redis://127.0.0.1:{proxy.port}/0 unavailable" in w], result
    assert len(result["warnings"]) == 1, result["warnings"]  # warned once
    assert any("unavailable" in n for n in result["notes"]), result
    figure(f"remote: Redis {how} mid-fetch: fell back to a local build, get took {result['seconds']:.1f} s "
           f"({elapsed:.1f} s with process start)")


def test_unreachable_remote_costs_one_warning_and_a_local_build(tmp_path, binding_seed):
    url = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    alone = Machine(tmp_path, "offline/checkout", url, seed=binding_seed)
    result = alone.get()
    assert result["ok"] and result["outcome"] == "compiled", result
    assert result["warnings"] == [f"remote cache redis://127.0.0.1:{url.rsplit(':', 1)[1]}/0 unavailable "
                                  f"(connection refused): going on with the local cache and local builds; "
                                  f"trying it again in 30 s"], result


@pytest.mark.slow
def test_eight_processes_race_for_a_remote_only_kernel(tmp_path, redis_server, first_machine):
    bob = Machine(tmp_path, "bob/checkout", redis_server.url)
    go = tmp_path / "go"
    results = _released_together([Child(WAIT_FOR_GO + CHILD, bob.env(GO=str(go))) for _ in range(8)], go)
    assert all(r["ok"] for r in results), results
    assert [b for r in results for b in r["builds"]] == [], results
    fetched = sorted(o for r in results for _, o in r["fetches"])
    assert fetched == ["hit", "hit"], fetched  # one fetch of the library, one of the binding
    # Each artifact is claimed, then fetched, by one process: usually the same
    # one for both, but under load one process may claim the library while
    # another claims the binding. Either way nothing is fetched twice.
    outcomes = sorted(r["outcome"] for r in results)
    assert outcomes in (["cache"] * 7 + ["remote"], ["cache"] * 6 + ["remote"] * 2), results


def test_read_only_mode_fetches_but_never_stores(tmp_path, redis_server, first_machine):
    from registry import _core

    erin = Machine(tmp_path, "erin/checkout", redis_server.url)
    erin.copy.edit("kernel.toml", 'description = "out = alpha * x + y"', 'description = "erin"')
    result = erin.get(REGISTRY_REMOTE_CACHE_MODE="read-only")
    assert result["ok"] and _lib_builds(result) == 1 and result["sources"]["binding"] == "remote", result
    assert result["remote"]["mode"] == "read-only" and result["remote"]["stored"] == 0, result
    client = redis_server.client()
    assert len(client.command("SMEMBERS", _core.remote_kernel_key(KERNEL))) == 1  # only Alice's library


def test_a_reader_user_cannot_store_and_the_get_still_works(tmp_path, binding_seed):
    # Redis ACLs: "builder" may write, "reader" may only read (README).
    server = RedisServer(tmp_path / "redis", "--user", "default", "off",
                         "--user", "builder", "on", ">b-pass", "~kreg:*", "~ccache:*", "+@all",
                         "--user", "reader", "on", ">r-pass", "~kreg:*", "~ccache:*", "+@read", "+@connection")
    try:
        alice = Machine(tmp_path, "alice/checkout", f"redis://builder:b-pass@127.0.0.1:{server.port}",
                        seed=binding_seed)
        built = alice.get()
        assert built["ok"] and built["remote"]["stored"] == 2, built
        frank = Machine(tmp_path, "frank/checkout", f"redis://reader:r-pass@127.0.0.1:{server.port}")
        got = frank.get()
        assert got["ok"] and got["outcome"] == "remote", got
        frank.copy.edit("kernel.toml", 'description = "out = alpha * x + y"', 'description = "frank"')
        edited = frank.get()  # builds, is refused storing: one warning, no failure
        assert edited["ok"] and edited["outcome"] == "compiled", edited
        assert len(edited["warnings"]) == 1 and "refused to store" in edited["warnings"][0], edited
        assert "r-pass" not in edited["warnings"][0] and "r-pass" not in edited["text"]
        wrong = Machine(tmp_path, "mallory/checkout", f"redis://reader:nope@127.0.0.1:{server.port}",
                        seed=binding_seed).get()
        assert wrong["ok"] and wrong["outcome"] == "compiled", wrong
        assert any("WRONGPASS" in w for w in wrong["warnings"]), wrong
    finally:
        server.stop()


def test_cli_lists_what_the_remote_stores_for_a_kernel(tmp_path, redis_server, first_machine):
    listing = first_machine.cli("remote", "ls", KERNEL, "--json")
    assert listing.returncode == 0, listing.stderr
    rows = json.loads(listing.stdout)
    assert [(r["kernel"], r["backend"], r["kind"]) for r in rows] == [(KERNEL, "cpu", "kernel-lib")], rows
    table = first_machine.cli("remote", "ls", KERNEL)
    assert rows[0]["key"] in table.stdout and "kernel-lib" in table.stdout, table.stdout
    info = first_machine.cli("remote", "info")
    assert info.returncode == 0 and f"redis://127.0.0.1:{redis_server.port}/0 (read-write), answers" in info.stdout
    assert "ccache remote storage:" in info.stdout
    unset = first_machine.cli("remote", "ls", KERNEL, REGISTRY_REMOTE_CACHE="")
    assert unset.returncode == 1 and "set REGISTRY_REMOTE_CACHE" in unset.stderr
    down = first_machine.cli("remote", "ls", KERNEL, REGISTRY_REMOTE_CACHE=f"redis://127.0.0.1:{free_port()}")
    assert down.returncode == 1 and "connection refused" in down.stderr, down.stderr


RANK = WAIT_FOR_GO + """
local_rank = int(os.environ["LOCAL_RANK"])
device = f"cuda:{local_rank}" if os.environ.get("RANKS_ON_GPU") else "cpu"
op = registry.get(os.environ["KERNEL"], device=device.split(":")[0])
torch.manual_seed(local_rank)
x, y = torch.randn(4096, device=device), torch.randn(4096, device=device)
out = op(x, y, 0.5)
say(rank=int(os.environ["RANK"]), device=str(out.device), ok=bool(torch.allclose(out, 0.5 * x + y)),
    builds=[list(b) for b in step.builds_run], outcome=registry.status(os.environ["KERNEL"],
    device=device.split(":")[0]).outcome)
"""


def _ranks(machine: Machine, go: Path, ranks: int, first_rank: int, world: int, gpu: bool) -> list[Child]:
    """What torchrun starts on one host: N processes with RANK, LOCAL_RANK
    and WORLD_SIZE, here all waiting for `go`."""
    extra = {"RANKS_ON_GPU": "1", "REGISTRY_DEVICE": "cuda"} if gpu else {}
    return [Child(RANK, machine.env(GO=str(go), RANK=str(first_rank + r), LOCAL_RANK=str(r),
                                    WORLD_SIZE=str(world), **extra)) for r in range(ranks)]


def _ranks_build_once_per_team(tmp_path, server, seed, gpu: bool, per_host: int):
    # Two hosts (two checkouts, two caches) start their ranks at the same
    # moment: one rank of one host builds, every other rank loads its result.
    hosts = [Machine(tmp_path, f"host{h}/job", server.url, seed=seed) for h in range(2)]
    go = tmp_path / "go"
    children = [c for h, host in enumerate(hosts) for c in _ranks(host, go, per_host, h * per_host, 2 * per_host, gpu)]
    results = _released_together(children, go)
    assert all(r["ok"] for r in results), results
    assert sum(b == [KERNEL, "kernel-lib"] for r in results for b in r["builds"]) == 1, results
    outcomes = [sorted(r["outcome"] for r in results[h * per_host:(h + 1) * per_host]) for h in range(2)]
    assert sorted(outcomes) == [["cache"] * (per_host - 1) + ["compiled"], ["cache"] * (per_host - 1) + ["remote"]], \
        outcomes
    if gpu:
        assert sorted(r["device"] for r in results[:per_host]) == [f"cuda:{i}" for i in range(per_host)]


def test_ranks_on_two_hosts_build_the_kernel_once(tmp_path, redis_server, binding_seed):
    _ranks_build_once_per_team(tmp_path, redis_server, binding_seed, gpu=False, per_host=3)


@pytest.mark.gpu
def test_ranks_on_two_hosts_build_the_kernel_once_on_gpus(tmp_path, redis_server):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _ranks_build_once_per_team(tmp_path, redis_server, None, gpu=True, per_host=torch.cuda.device_count())
    # (no binding seed: the first rank to claim builds it, for both hosts)


def test_a_claim_left_by_a_dead_builder_only_delays_the_build(tmp_path, redis_server, binding_seed):
    # Another machine claimed the library's build and died: its claim is not
    # renewed, expires, and this machine builds after waiting that long only.
    from registry import _core

    gina = Machine(tmp_path, "gina/checkout", redis_server.url, seed=binding_seed)
    assert gina.get()["ok"]  # stores the library: its key is now listed
    client = redis_server.client()
    lib_key = [k.decode() for k in client.command("SMEMBERS", _core.remote_kernel_key(KERNEL))][0]
    client.command("DEL", _core.remote_object_key(lib_key))
    henry = Machine(tmp_path, "henry/checkout", redis_server.url, seed=binding_seed)
    go = tmp_path / "go"
    child = Child(WAIT_FOR_GO + CHILD, henry.env(GO=str(go)))
    try:
        child.message(timeout=180)
        client.command("SET", _core.remote_claim_key(lib_key), "elsewhere pid=1", "PX", "2000")
        go.touch()
        result = child.message(timeout=300)
        assert child.finish() == 0, child.stderr_text()
    finally:
        child.kill_group()
    assert result["ok"] and result["outcome"] == "compiled" and _lib_builds(result) == 1, result
    assert 1.5 < result["seconds"] < 60, result
    assert client.command("EXISTS", _core.remote_claim_key(lib_key)) == 0  # released after storing
    assert client.command("EXISTS", _core.remote_object_key(lib_key)) == 1


def test_small_cache_records_travel_by_their_path(redis_server, monkeypatch):
    # Any small record of the cache (e.g. a dependency record under v1/deps/)
    # can be shared by its path; its reader verifies it as a local file.
    from registry.remote import team_cache

    writer = team_cache.RemoteCache(redis_server.url, "read-write", 0.5)
    assert writer.get_file("deps/00ff.toml") is None
    assert writer.put_file("deps/00ff.toml", b"format = 1\n")
    assert team_cache.RemoteCache(redis_server.url, "read-only", 0.5).get_file("deps/00ff.toml") == b"format = 1\n"
    assert not team_cache.RemoteCache(redis_server.url, "read-only", 0.5).put_file("deps/00ff.toml", b"other")
    assert writer.get_file("deps/00ff.toml") == b"format = 1\n"
    with pytest.raises(ValueError, match="relative to v1/"):
        writer.put_file("../../etc/passwd", b"")


BIAS_CHILD = """
name = os.environ["KERNEL"]
op = registry.get(name, device="cpu")
torch.manual_seed(0)
x, y = torch.randn(64), torch.randn(64)
status = registry.status(name, device="cpu")
say(bias=float((op(x, y, 1.5) - (1.5 * x + y)).mean()), outcome=status.outcome, key=status.key,
    lib_builds=sum(b == [name, "kernel-lib"] for b in map(list, step.builds_run)))
"""


def _bias_get(machine: Machine) -> dict:
    child = Child(BIAS_CHILD, machine.env())
    result = child.message(timeout=300)
    assert child.finish() == 0, child.stderr_text()
    return result


def test_a_header_included_through_a_macro_is_exact_across_machines(tmp_path, redis_server, binding_seed):
    # The scan cannot see extra.h; only the builder's compiler reported it.
    # The second machine has no local record of that, so it must find the
    # team's dependency record to compute the key Alice's build has: the
    # right build with no compile for each content, never the other one.
    alice = Machine(tmp_path, "alice/src", redis_server.url, seed=binding_seed)
    bob = Machine(tmp_path, "bob/elsewhere/src", redis_server.url, seed=binding_seed)
    include_extra_through_a_macro(alice.copy, "0.0f")
    include_extra_through_a_macro(bob.copy, "0.0f")
    first = _bias_get(alice)
    assert first["bias"] == pytest.approx(0.0, abs=1e-6) and first["lib_builds"] == 1, first
    alice.copy.path("extra.h").write_text("#define AXPY_EXTRA 5.0f\n")
    edited = _bias_get(alice)
    assert edited["bias"] == pytest.approx(5.0, abs=1e-4) and edited["lib_builds"] == 1, edited

    old = _bias_get(bob)  # Bob still has the first content
    assert old["bias"] == pytest.approx(0.0, abs=1e-6), old
    assert (old["outcome"], old["lib_builds"], old["key"]) == ("remote", 0, first["key"]), old
    bob.copy.path("extra.h").write_text("#define AXPY_EXTRA 5.0f\n")
    new = _bias_get(bob)
    assert new["bias"] == pytest.approx(5.0, abs=1e-4), new
    assert (new["outcome"], new["lib_builds"], new["key"]) == ("remote", 0, edited["key"]), new
