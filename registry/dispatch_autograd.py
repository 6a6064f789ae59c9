"""Autograd for torch.ops.<namespace>.<op>: the manifest's backward op,
registered at the dispatcher's Autograd key with torch.library.register_autograd.

That route, not an autograd.Function around the call, is what torch.compile
(fullgraph) and torch.library.opcheck expect: AOTAutograd traces
setup_context and backward into the joint graph, and the backward runs as
torch.ops.<namespace>.<backward op>, one more op of the graph.

The backward op is matched by names (core/manifest.h, as registry/autograd.py
does for the handle): its arguments are grad_<output>, or a forward argument
or output of the same name (saved in the forward); its returns are
grad_<argument>. Forward arguments without a returned gradient get None.

Gradients autograd hands a backward are often not contiguous: `.sum().backward()`
gives an expanded (stride-0) one. Every op refuses non-contiguous inputs and
never copies them, so each incoming gradient is made contiguous here, a copy
only where it is not already: only gradients autograd made are copied, never
what the user passed.

This file imports torch only: registry/tools/aot.py copies it into every
exported package (<package>/_autograd.py), which must run without the registry.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch


class Backward(NamedTuple):
    """The backward op of one forward op, as its signature names things."""

    op: str                  # torch.ops.<namespace>.<op>
    args: tuple[str, ...]    # grad_<output>, or a forward argument or output
    returns: tuple[str, ...]  # grad_<forward argument>


def contiguous_grads(grads) -> tuple:
    """The gradients autograd supplied, each made contiguous (None stays None)."""
    return tuple(g.contiguous() if isinstance(g, torch.Tensor) else g for g in grads)


def register(library, namespace: str, name: str, args: tuple[str, ...], positional: int,
             returns: tuple[str, ...], backward_of: Callable[[str], "Backward | None"],
             missing: Callable[[], Exception]) -> None:
    """Registers the autograd of torch.ops.<namespace>.<name>.

    args: the op's argument names in order, the first `positional` of them
    positional; returns: its return names. backward_of(device type) gives
    the backward to use, read in each forward (a hot reload may change it),
    or None: backward() then raises missing()."""
    ops = getattr(torch.ops, namespace)

    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        values = dict(zip(args, inputs))
        values.update(keyword_only_inputs or {})
        outputs = output if isinstance(output, tuple) else (output,)
        plan = backward_of(outputs[0].device.type if outputs else "cpu")
        ctx.plan, ctx.scalars, ctx.saved_names = plan, {}, ()
        # Integer outputs (indices, quantized values) carry no gradient.
        ctx.mark_non_differentiable(*(t for t in outputs if not (t.is_floating_point() or t.is_complex())))
        if plan is None:
            return
        names, tensors = [], []
        for arg in plan.args:
            if arg.startswith("grad_") and arg[5:] in returns:
                continue
            value = values[arg] if arg in values else outputs[returns.index(arg)]
            if isinstance(value, torch.Tensor):
                names.append(arg)
                tensors.append(value)
            else:
                ctx.scalars[arg] = value
        ctx.saved_names = tuple(names)
        ctx.save_for_backward(*tensors)

    def backward(ctx, *grads):
        plan = ctx.plan
        if plan is None:
            raise missing()
        grads = contiguous_grads(grads)
        saved = dict(zip(ctx.saved_names, ctx.saved_tensors))
        values = []
        for arg in plan.args:
            if arg.startswith("grad_") and arg[5:] in returns:
                values.append(grads[returns.index(arg[5:])])
            else:
                values.append(saved[arg] if arg in saved else ctx.scalars[arg])
        results = getattr(ops, plan.op)(*values)
        results = results if isinstance(results, tuple) else (results,)
        by_name = dict(zip(plan.returns, results))
        return tuple(by_name.get("grad_" + arg) for arg in args[:positional])

    torch.library.register_autograd(f"{namespace}::{name}", backward, setup_context=setup_context, lib=library)
