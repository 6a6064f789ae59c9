"""`python -m registry`: every subcommand, and its exit code
(0 ok, 1 build/manifest failure, 2 usage error, 3 kernel not found)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKOUT, KernelCopy
from reliability_helpers import child_env
from reliability_helpers import binding_seed, private_cache, private_kernels  # noqa: F401 (fixtures)


def cli(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "registry", *args], env=env, cwd=str(CHECKOUT),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def env(private_cache, private_kernels) -> dict:
    return child_env(private_cache, private_kernels)


@pytest.mark.parametrize("args, says", [
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice"),
    (["cache"], "required: CACHE_COMMAND"),
    (["build"], "required: name"),
    (["build", "axpy", "--device", "gpu"], "invalid choice: 'gpu'"),
    (["cache", "gc", "--max-bytes", "lots"], "--max-bytes must be a size such as 20G"),
    (["cache", "clear"], "add --yes to confirm"),
])
def test_usage_errors_exit_2(env, args, says):
    done = cli(env, *args)
    assert done.returncode == 2, done
    assert "usage: python -m registry" in done.stderr and says in done.stderr, done.stderr


def test_list(env, private_kernels):
    copy = KernelCopy(private_kernels, "axpy", "axpy_listed")
    done = cli(env, "list")
    assert done.returncode == 0, done.stderr
    assert f"{copy.name}  {copy.path('kernel.toml')}" in done.stdout.splitlines()


def test_build_status_and_cache_commands(env, private_kernels, private_cache):
    copy = KernelCopy(private_kernels, "axpy", "axpy_cli")

    first = cli(env, "build", copy.name, "--device", "cpu")
    assert first.returncode == 0, first.stderr
    assert "last get: compiled" in first.stdout and f"kernel {copy.name} [cpu]" in first.stdout
    again = cli(env, "build", copy.name)
    assert again.returncode == 0 and "last get: cache" in again.stdout, again
    forced = cli(env, "build", copy.name, "--rebuild")
    assert forced.returncode == 0 and "forced rebuild" in forced.stdout, forced
    status = cli(env, "status", copy.name, "--device", "cpu")
    assert status.returncode == 0 and "last get: cache" in status.stdout, status

    ls = cli(env, "cache", "ls", "--json")
    assert ls.returncode == 0, ls.stderr
    entries = json.loads(ls.stdout)
    assert sorted((e["kernel"], e["kind"]) for e in entries if e["kind"] == "kernel-lib") == [(copy.name, "kernel-lib")]
    assert {e["kind"] for e in entries} == {"kernel-lib", "binding"}
    assert not any(e["pinned"] for e in entries)  # the build processes have exited
    table = cli(env, "cache", "ls")
    assert table.returncode == 0 and table.stdout.startswith("KEY ") and copy.name in table.stdout, table

    info = cli(env, "cache", "info")
    assert info.returncode == 0, info.stderr
    assert f"root      {private_cache}" in info.stdout
    assert f"entries   {len(entries)} (0 pinned by live processes)" in info.stdout
    assert "of a 20.0 GiB cap" in info.stdout and "ccache" in info.stdout

    roomy = cli(env, "cache", "gc")
    assert roomy.returncode == 0 and "removed 0 entries" in roomy.stdout, roomy
    # One byte short of holding both: the least recently used one goes.
    tight = cli(env, "cache", "gc", "--max-bytes", str(sum(e["disk_bytes"] for e in entries) - 1))
    assert tight.returncode == 0, tight.stderr
    assert "removed 1 entries" in tight.stdout, tight.stdout
    assert len(json.loads(cli(env, "cache", "ls", "--json").stdout)) == 1

    clear = cli(env, "cache", "clear", "--yes")
    assert clear.returncode == 0 and "removed 1 entries" in clear.stdout, clear
    assert json.loads(cli(env, "cache", "ls", "--json").stdout) == []
    assert "the cache is empty" in cli(env, "cache", "ls").stdout


def test_failures_exit_1_and_unknown_kernels_exit_3(env, private_kernels):
    typo = cli(env, "build", "axpy_clj")
    assert typo.returncode == 3, typo
    assert "no kernel named 'axpy_clj'" in typo.stderr and typo.stdout == ""

    bad = KernelCopy(private_kernels, "axpy", "axpy_badcli")
    bad.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["missing.cpp"]')
    manifest = cli(env, "status", bad.name)
    assert manifest.returncode == 1, manifest
    assert f"{bad.path('kernel.toml')}: cpu.sources[0]:" in manifest.stderr

    broken = KernelCopy(private_kernels, "axpy", "axpy_brokencli")
    broken.edit("axpy_cpu.cpp", "return nullptr;", "return nullptr")
    build = cli(env, "build", broken.name)
    assert build.returncode == 1, build
    assert "axpy_cpu.cpp:" in build.stderr and "error:" in build.stderr, build.stderr


def test_a_bad_manifest_or_setting_is_one_tidy_line_not_a_traceback(env, private_kernels):
    """The CLI catches RegistryError, which every error of the package (the
    core's ManifestError included) derives from."""
    bad = KernelCopy(private_kernels, "axpy", "axpy_unparsable")
    bad.edit("kernel.toml", 'sources = ["axpy_cpu.cpp"]', 'sources = ["axpy_cpu.cpp"')
    done = cli(env, "build", bad.name)
    assert done.returncode == 1, done
    assert done.stderr.startswith("error: ") and str(bad.path("kernel.toml")) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""

    setting = cli({**env, "REGISTRY_DEVICE": "gpu"}, "build", "axpy")
    assert setting.returncode == 1, setting
    assert setting.stderr == "error: REGISTRY_DEVICE must be 'cpu' or 'cuda', not 'gpu'\n"


def test_cache_commands_do_not_create_a_cache(env, tmp_path):
    env = {**env, "REGISTRY_CACHE_DIR": str(tmp_path / "none")}
    for args in (["cache", "ls"], ["cache", "info"], ["cache", "gc"], ["cache", "clear", "--yes"]):
        done = cli(env, *args)
        assert done.returncode == 0, done
    assert not Path(tmp_path / "none").exists()
