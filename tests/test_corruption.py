"""A damaged cache is never loaded and never a crash: each kind of damage is
detected, treated as a miss, rebuilt or re-derived, and (for entries)
reported in status().notes.

Each case builds its own copy of axpy in this process, damages what that
build left in the cache, then gets the kernel in a fresh process (as a
restarted notebook would) and checks the result there.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

import registry
from conftest import KernelCopy
from reliability_helpers import Child, child_env, figure

ENTRY_CASES = {
    # case: (damage, what lookup says about it)
    "truncated_artifact": ("truncate the .so to half its size", "truncated or altered"),
    "altered_byte": ("flip one byte of the .so, same size", "does not match the XXH3 digest"),
    "garbage_entry": ("replace entry.toml with garbage", "entry.toml is unusable"),
    "unknown_format": ("set format = 99 in entry.toml", "entry format 99"),
}
OTHER_CASES = ["garbage_memo", "garbage_toolchains"]

_outcomes: dict[str, dict] = {}
_detected: list[str] = []  # entry cases that passed the survival test


def _lib_dir(name: str) -> Path:
    return Path(registry.status(name, device="cpu").artifacts["kernel library"]).parent


def _replace(path: Path, data: bytes) -> None:
    # This process has the library mapped: damage a new file renamed over it,
    # as an in-place write would turn the mapped pages into SIGBUS here.
    tmp = path.with_name(path.name + ".damaged")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _damage(case: str, name: str, cache: Path) -> None:
    lib = _lib_dir(name)
    entry_toml = lib / "entry.toml"
    artifact = lib / tomllib.loads(entry_toml.read_text())["artifact"]
    if case == "truncated_artifact":
        data = artifact.read_bytes()
        _replace(artifact, data[: len(data) // 2])
    elif case == "altered_byte":
        data = bytearray(artifact.read_bytes())
        data[len(data) // 2] ^= 0x40
        _replace(artifact, bytes(data))
    elif case == "garbage_entry":
        entry_toml.write_bytes(b"\x00\xffformat = [[[ not toml\n")
    elif case == "unknown_format":
        entry_toml.write_text(entry_toml.read_text().replace("format = 1\n", "format = 99\n", 1))
    elif case == "garbage_memo":
        memos = list((cache / "v1" / "memo").glob(f"{name}.cpu.*.toml"))
        assert len(memos) == 1, memos
        memos[0].write_bytes(b"[[stamp]]\npath = 7\n\xff\xfe garbage")
    elif case == "garbage_toolchains":
        (cache / "v1" / "toolchains.toml").write_bytes(b"[\"/usr/bin/c++\"]\nversion = \n\x00garbage")
    else:
        raise AssertionError(case)


def _outcome(case: str, cache_root: Path, kernels_root: Path) -> dict:
    """Damage once per case, shared by the tests below."""
    if case not in _outcomes:
        copy = KernelCopy(kernels_root, "axpy", f"axpy_corrupt_{case}")
        registry.get(copy.name, device="cpu")
        key = registry.status(copy.name, device="cpu").key
        _damage(case, copy.name, cache_root)
        child = Child("say(**check(os.environ['KERNEL']))", child_env(cache_root, kernels_root, KERNEL=copy.name))
        result = child.message(timeout=180)
        assert child.finish() == 0, child.stderr_text()
        result["key"] = key
        _outcomes[case] = result
    return _outcomes[case]


@pytest.mark.parametrize("case", [*ENTRY_CASES, *OTHER_CASES])
def test_damage_is_survived_with_a_correct_result(case, cache_root, kernels_root):
    from registry import _core

    result = _outcome(case, cache_root, kernels_root)
    assert result["ok"], result
    store = _core.CacheStore(str(cache_root))
    assert store.lookup(result["key"]).entry is not None, "the rebuilt entry must verify"
    if case in ENTRY_CASES:
        assert result["outcome"] == "compiled" and result["compiled"] == ["lib"], result
        _detected.append(case)
    elif case == "garbage_memo":
        # The memo is only a shortcut: without it the key is re-derived by
        # hashing, the (intact) entry is found, and a fresh memo is written.
        assert result["outcome"] == "cache", result
        assert result["changes"] == ["no previous build recorded in this cache"], result
        memos = list((cache_root / "v1" / "memo").glob(f"{result['name']}.cpu.*.toml"))
        assert _core.read_memo(str(memos[0])) is not None
    else:
        # A damaged toolchain memo means asking the compiler again, then rewriting it.
        assert result["outcome"] == "cache", result
        assert tomllib.loads((cache_root / "v1" / "toolchains.toml").read_text())


@pytest.mark.parametrize("case", list(ENTRY_CASES))
def test_rejected_entry_is_reported_in_status_notes(case, cache_root, kernels_root):
    result = _outcome(case, cache_root, kernels_root)
    reason = ENTRY_CASES[case][1]
    assert any(n.startswith("cached lib rejected: ") and reason in n for n in result["notes"]), result["notes"]


@pytest.fixture(scope="module", autouse=True)
def _figures():
    yield
    entries = [c for c in ENTRY_CASES if c in _outcomes]
    reported = [c for c in entries if any("rejected" in n for n in _outcomes[c]["notes"])]
    if entries:
        figure(f"corruption: {len(_detected)}/{len(entries)} damaged entries detected, rebuilt, correct "
               f"({', '.join(entries)}); reported in status().notes: {len(reported)}/{len(entries)}; "
               f"damaged memo and toolchains.toml re-derived: "
               f"{sum(c in _outcomes and _outcomes[c]['ok'] for c in OTHER_CASES)}/{len(OTHER_CASES)}")


# ---- files the registry derives and keeps under the cache root -------------
# Each is rewritten, never trusted, when its bytes are not what it would write.

GARBAGE = b"\x7fELF\x00\xff\xfe not what was written \x80\x81\n"


def test_garbage_generated_binding_source_is_regenerated(tmp_path):
    from registry import _core
    from registry.builder import keys

    manifest = _core.parse_manifest(str(Path(__file__).resolve().parent.parent / "kernels/axpy/kernel.toml"))

    def binding_source() -> Path:
        plan = _core.make_plan(manifest, _core.CacheStore(str(tmp_path)), "cpu", {}, str(keys.REGISTRY_INCLUDE), [],
                               False)
        return Path(next(a for a in plan.artifacts if a.what == "binding").source)

    source = binding_source()
    source.write_bytes(GARBAGE)
    assert binding_source() == source
    assert source.read_text() == _core.generate_shared_binding("cpu")


def test_garbage_ccache_wrapper_is_rewritten(tmp_path):
    import shutil
    import subprocess

    from registry.builder import ccache

    ccache_exe, real_cxx = shutil.which("ccache"), os.path.realpath(shutil.which("c++"))
    if ccache_exe is None:
        pytest.skip("ccache is not installed")
    wrapper = ccache._cxx_wrapper(tmp_path, ccache_exe, real_cxx)
    good = wrapper.read_bytes()
    for damage in (GARBAGE, good[:-5], b""):
        wrapper.write_bytes(damage)
        assert ccache._cxx_wrapper(tmp_path, ccache_exe, real_cxx) == wrapper
        assert wrapper.read_bytes() == good and os.access(wrapper, os.X_OK)
    wrapper.chmod(0o600)  # right text, not executable
    ccache._cxx_wrapper(tmp_path, ccache_exe, real_cxx)
    assert os.access(wrapper, os.X_OK)
    done = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("damage", [GARBAGE, b"identity-of-this-machine\tnot-an-arch\n"])
def test_garbage_cuda_arch_memo_is_asked_again(tmp_path, damage):
    import re

    from registry import environment

    memo = tmp_path / "v1" / "cuda_arch.txt"
    memo.parent.mkdir(parents=True)
    memo.write_bytes(damage.replace(b"identity-of-this-machine", environment._machine_identity().encode()))
    answer = environment._device_answer(tmp_path)
    assert re.fullmatch(r"none|\d+\.\d+", answer), answer
    assert f"{environment._machine_identity()}\t{answer}\n" in memo.read_text()


def test_garbage_lock_file_holder_is_readable_text(tmp_path):
    from registry import _core

    lock = tmp_path / "k.lock"
    lock.write_bytes(GARBAGE)
    holder = _core.lock_holder(str(lock))
    assert isinstance(holder, str) and holder.isprintable(), repr(holder)


def test_garbage_inline_kernel_file_is_rewritten(tmp_path):
    from registry.notebook import magics

    source = tmp_path / "v1" / "inline" / "k" / "k.cpp"
    source.parent.mkdir(parents=True)
    source.write_bytes(GARBAGE)
    assert magics._write_if_changed(source, "int k;\n")
    assert source.read_text() == "int k;\n"
    assert not magics._write_if_changed(source, "int k;\n")
