"""What a cache miss runs: the build recipe, the two build paths (torch's
cpp_extension.load and the registry's own compiler call), ccache, the key
vocabulary for tools, progress, diagnostics, the lock-build-publish step.

Imported only when something must be built; never imports registry.notebook
or registry.tools (tests/test_import_rules.py)."""
