"""Autograd for registry ops: the manifest names an op's backward, another op
of the same kernel, matched by names (core/manifest.h):

    [[op]]  signature = "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor y"
            backward  = "rmsnorm_backward"
    [[op]]  signature = "rmsnorm_backward(Tensor grad_y, Tensor x, Tensor weight, float eps) -> (Tensor grad_x, Tensor grad_weight)"

The backward's arguments are grad_<output>, or a forward argument or output of
the same name (tensors are saved for it); its returns are grad_<argument>.
Forward arguments without a returned gradient get None. Incoming gradients
are made contiguous (autograd hands e.g. expanded ones) since ops never copy.
An op without a backward still runs forward; backward() reaching it raises.
"""
from __future__ import annotations

import torch

from registry.errors import OpCallError
from registry.state import STATE


class _OpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, *args):
        outputs = op._call_raw(args)
        ctx.op = op
        ctx.arity = len(args)
        ctx.scalars = {}
        spec = op._spec
        returns = [r.name for r in spec.signature.returns]
        as_tuple = outputs if isinstance(outputs, tuple) else (outputs,)
        ctx.returns = returns
        backward = op._backward
        saved_names, saved = [], []
        if backward is not None:
            names = [a.name for a in spec.signature.args]
            for arg in backward._spec.signature.args:
                if arg.name.startswith("grad_") and arg.name[5:] in returns:
                    continue
                if arg.name in names:
                    value = args[names.index(arg.name)]
                    if isinstance(value, torch.Tensor):
                        saved_names.append(arg.name)
                        saved.append(value)
                    else:
                        ctx.scalars[arg.name] = value
                else:
                    saved_names.append(arg.name)
                    saved.append(as_tuple[returns.index(arg.name)])
        ctx.saved_names = saved_names
        ctx.save_for_backward(*saved)
        non_float = [t for t in as_tuple if not t.is_floating_point()]
        if non_float:
            ctx.mark_non_differentiable(*non_float)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        op = ctx.op
        backward = op._backward
        if backward is None:
            raise no_backward_error(op)
        saved = dict(zip(ctx.saved_names, ctx.saved_tensors))
        values = []
        for arg in backward._spec.signature.args:
            if arg.name.startswith("grad_") and arg.name[5:] in ctx.returns:
                g = grads[ctx.returns.index(arg.name[5:])]
                values.append(g.contiguous())
            elif arg.name in saved:
                values.append(saved[arg.name])
            else:
                values.append(ctx.scalars[arg.name])
        results = backward._call_raw(tuple(values))
        results = results if isinstance(results, tuple) else (results,)
        by_name = {r.name[5:]: t for r, t in zip(backward._spec.signature.returns, results)}
        names = [a.name for a in op._spec.signature.args]
        return (None, *(by_name.get(n) for n in names))


def no_backward_error(op) -> OpCallError:
    return OpCallError(
        f"{op.kernel}.{op.name} has no backward, but an input requires grad. Add "
        f"backward = \"{op.name}_backward\" to its [[op]] in kernel.toml (an op of the kernel taking "
        f"grad_<output> and the tensors it needs, returning grad_<argument>), or call it under "
        f"torch.no_grad() / on inputs that do not require grad.")


def call_with_autograd(op, args: tuple):
    if any(a.mutated for a in op._spec.signature.args):
        raise OpCallError(f"{op.kernel}.{op.name} writes its Tensor(a!) argument in place and has no "
                           f"gradient; call it under torch.no_grad() or on tensors that do not require grad")
    namespace = STATE.torch_namespace(op.kernel, op.name)
    if STATE.torch_autograd.get((namespace, op.name)) == "python":
        # registry.register_autograd gave it a backward at the dispatcher: the handle takes the same one.
        return getattr(getattr(torch.ops, namespace), op.name)(*args)
    return _OpFunction.apply(op, *args)
