"""AdamW steps that torch.compile can fuse with what follows them (SAC: the target critic's EMA).

The agents keep torch's own `torch.optim.AdamW` objects: they hold the hyperparameters, the moment buffers
and the step counters, and their `state_dict` is what checkpoints store. Only the step's arithmetic moves:

- Eagerly (CPU, or a part that could not compile), `adamw_step` calls the optimizer's own ``step()``: the
  fused CUDA kernel on CUDA, torch's loop on CPU.
- Inside a compiled update part, `adamw_step` runs the same update through torch's functional, multi-tensor
  form (``torch.optim.adam.adam`` with decoupled weight decay, device-side step counters). Dynamo cannot
  trace ``Optimizer.step`` without a graph break, but it traces the functional form, so inductor fuses the
  step over all the tensors, and whatever the part does next, into a few kernels that fill the GPU. torch's
  fused kernel processes fixed chunks per block and occupies a fraction of the multiprocessors on the
  critic's million parameters (docs/perf/tuning/0025 has the measurements).

A caller that computes its gradients itself (FlashSAC's temperature, whose gradient is its loss) hands them
to `adamw_step` instead of running a backward; the step is the same either way.

Optimizer step hooks run only inside ``step()``: data-parallel training averages gradients across ranks in a
step pre-hook (`trainrt.runner.distributed`). `has_step_hooks` tells the agents to keep such an optimizer's
step eager, where the hooks run.

The compiled form needs every moment buffer and step counter to exist before it is traced: `init_adamw_state`
creates the ones ``step()`` would create lazily (same keys, shapes, dtypes and devices; existing state, e.g.
loaded from a checkpoint, is kept).
"""

from __future__ import annotations

import torch
import torch.optim.optimizer as optimizer_module
from torch.optim.adam import adam


def has_step_hooks(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``step()`` would run hooks (the optimizer's own or global ones) that the functional form skips."""
    return bool(
        optimizer._optimizer_step_pre_hooks
        or optimizer._optimizer_step_post_hooks
        or optimizer_module._global_optimizer_pre_hooks
        or optimizer_module._global_optimizer_post_hooks
    )


@torch.no_grad()
def init_adamw_state(optimizer: torch.optim.AdamW) -> None:
    """Create the moment buffers and float32 step counters ``optimizer.step()`` would create lazily, on each
    parameter's device; parameters that already have state keep it."""
    for group in optimizer.param_groups:
        if group["amsgrad"] or group["maximize"] or group["differentiable"]:
            raise ValueError("adamw_step supports plain AdamW (amsgrad, maximize and differentiable off)")
        for param in group["params"]:
            state = optimizer.state[param]
            if state:
                continue
            state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


@torch.no_grad()
def adamw_step(optimizer: torch.optim.AdamW, grads: list[torch.Tensor] | None = None) -> None:
    """One AdamW step over every parameter of ``optimizer`` that has a gradient.

    Eagerly this is ``optimizer.step()``. While torch.compile traces it, it is the functional multi-tensor
    update with device-side step counters (`init_adamw_state` must have run), which inductor fuses.

    Args:
        optimizer: the AdamW whose parameters step.
        grads: one gradient per parameter of ``optimizer`` (all groups, in order), for a caller that computes
            them itself instead of through a backward (FlashSAC's temperature). Eagerly they become the
            parameters' ``.grad`` before ``step()``, as a backward would have left them; compiled, they go to
            the functional update directly. None: the parameters' own ``.grad``.
    """
    if grads is not None:
        count = sum(len(group["params"]) for group in optimizer.param_groups)
        if len(grads) != count:
            raise ValueError(f"adamw_step got {len(grads)} gradients for the optimizer's {count} parameters")
    if not torch.compiler.is_compiling():
        if grads is not None:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            for param, grad in zip(params, grads, strict=True):
                param.grad = grad.detach().clone()  # a step hook may average it in place
        optimizer.step()
        return
    first = 0  # index of the group's first parameter in ``grads``
    for group in optimizer.param_groups:
        if grads is not None:
            params = list(group["params"])
            param_grads = list(grads[first : first + len(params)])
            first += len(params)
        else:
            params = [p for p in group["params"] if p.grad is not None]
            param_grads = [p.grad for p in params]
        if not params:
            continue
        states = [optimizer.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adam(
            params,
            param_grads,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=True,
            capturable=True,
            differentiable=False,
            fused=False,
            has_complex=False,
            decoupled_weight_decay=True,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )
