"""registry.tune's room: the search (search.py), each config's check in an
isolated worker (check.py), the timing and the choice (timing.py), the
result a notebook shows (result.py). The table a get reads is not here:
registry/tuned.py, beside resolve, so a get never loads the search.

Not imported by `import registry`: registry.tune reaches search.tune on
first use.
"""
