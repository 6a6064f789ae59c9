"""What a build depends on besides files (registry/environment.py): the
values keys record must not change with how cheaply they are read."""
from __future__ import annotations

import sysconfig

from registry import _core, environment


def test_the_python_abi_is_sysconfigs():
    assert environment.python_soabi() == sysconfig.get_config_var("SOABI")


def test_the_environment_asks_sysconfig_nothing(tmp_path, monkeypatch):
    # sysconfig's first answer costs ~1.5 ms where nothing has read it yet
    # (torch on Python 3.12), a sixth of a fresh process's cached get.
    import torch  # noqa: F401  (imported first: torch may read sysconfig itself)

    def refuse(*args):
        raise AssertionError("sysconfig asked")

    monkeypatch.setattr(sysconfig, "get_config_var", refuse)
    monkeypatch.setattr(sysconfig, "get_config_vars", refuse)
    env = environment.build_environment("cpu", tmp_path)
    assert env["env.python"].endswith(" " + environment.python_soabi())


def test_host_flags_come_from_the_core():
    assert environment.host_cxx_flags() == _core.HOST_CXX_FLAGS
    assert set(environment.host_cxx_flags()) <= {"-mf16c"}
