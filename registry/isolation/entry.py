"""registry.get(name, isolate=True / checked=True): the normal get, then the
isolated twin of its handle (checked: the twin that runs the checked variant)."""
from __future__ import annotations


def get_isolated(get, name: str, *, rebuild: bool, device: str | None, checked: bool):
    """get: registry.get itself (passed in, so this module imports no top level)."""
    from registry.isolation.handle import isolated

    source = get(name, rebuild=rebuild, device=device, isolate=False)
    if not checked:
        return isolated(source)
    from registry.isolation import launch_env
    from registry.isolation.checked import flavor_of

    backend = next(iter(source.ops.values())).backend if hasattr(source, "ops") else source.backend
    if backend == "cpu":
        launch_env.asan_runtime()  # says what to install when it is missing
    else:
        launch_env.compute_sanitizer()
    return isolated(source, flavor_of(backend))
