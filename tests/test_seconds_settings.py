"""Settings given in seconds (REGISTRY_REMOTE_TIMEOUT, REGISTRY_ISOLATE_TIMEOUT):
unset or blank is the default, anything but a positive number is a
SettingError naming the variable and the text it holds."""
from __future__ import annotations

import pytest

from registry import knobs
from registry.errors import SettingError

SECONDS = [("REGISTRY_REMOTE_TIMEOUT", knobs.remote_timeout, 1.0),
           ("REGISTRY_ISOLATE_TIMEOUT", knobs.isolate_timeout, 30.0)]


@pytest.mark.parametrize("name, read, default", SECONDS, ids=[s[0] for s in SECONDS])
def test_seconds_default_parse_and_refuse(monkeypatch, name, read, default):
    monkeypatch.delenv(name, raising=False)
    assert read() == default
    monkeypatch.setenv(name, "  ")
    assert read() == default
    monkeypatch.setenv(name, " 2.5 ")
    assert read() == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(SettingError, match=f"{name} must be a positive number of seconds, not '{bad}'"):
            read()
