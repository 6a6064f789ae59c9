"""Running one build step: the registry's own compiler call for a torch-free
kernel library (direct.py), torch's cpp_extension.load otherwise
(torch_extension.py). Both take a BuildPlan and return a BuildResult
(step.py)."""
from __future__ import annotations

from pathlib import Path

from registry.builder import direct, torch_extension
from registry.builder.step import BuildPlan, BuildResult


def run_build(plan: BuildPlan, staging: Path) -> BuildResult:
    return (direct.build if plan.direct else torch_extension.build)(plan, staging)
