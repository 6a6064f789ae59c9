"""registry.get(name, isolate=True / checked=True): the normal get, then the
isolated twin of its handle (or, checked, of the checked variant's handle)."""
from __future__ import annotations


def get_isolated(name: str, *, rebuild: bool, device: str | None, checked: bool):
    import registry
    from registry.isolation import isolated

    if checked:
        from registry.isolation.checked import get_checked

        return get_checked(name, rebuild=rebuild, device=device)
    return isolated(registry.get(name, rebuild=rebuild, device=device, isolate=False))
