"""Device code in its own cubin: compiled with NVRTC or `nvcc -cubin`, cached
like every artifact, loaded with the CUDA driver API. Never imports
registry.notebook or registry.tools (tests/test_import_rules.py)."""
