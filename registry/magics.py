"""`%load_ext registry.magics`: the public name of the notebook magics, which
live in registry/notebook/magics.py (imported when the extension loads)."""


def load_ipython_extension(ipython) -> None:
    from registry.notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from registry.notebook.magics import unload_ipython_extension as unload

    unload(ipython)
