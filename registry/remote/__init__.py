"""The team's shared cache (team_cache.py) and the minimal Redis client it
talks through (resp.py)."""
