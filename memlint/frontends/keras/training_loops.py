"""Custom training loops: the step a model runs when the code trains it without ``fit``.

keras.io's "training loop from scratch" iterates over a dataset's batches, calls the model on
each under ``tf.GradientTape()`` (or with ``training=True``) and hands the gradients to an
optimizer's ``apply_gradients``.  memlint follows the loop over one representative batch
(``data.batches``), and this module records what the step needs:

* a model called eagerly on a batch of data inside a ``GradientTape`` block or with
  ``training=True`` is trained at that batch size (a ``"train_call"`` usage, read by
  ``setup.training_setup``);
* the optimizers whose ``apply_gradients`` / ``minimize`` the code calls: when the model has no
  ``compile()`` and the file applies exactly one optimizer, that one is the model's;
* a ``GradientTape`` block that runs several models, or one model several times (a
  decoder called once per target step, a GAN's two models), holds all their activations
  at once: each such model's usage says so (``"shared_step"``), and its estimate, of one
  call alone, is a lower bound (:func:`tape_block`);
* ``tape.gradient(loss, x)`` where ``x`` is what a model the tape's block trained was called
  on (the image a style transfer optimises, the input an adversarial example perturbs, a
  DeepDream image): that step differentiates the model's input too, through frozen layers
  as well (``"input_gradient"``), and where the code applies an optimizer to ``x``, its
  slots are the input's size (:class:`Tape`);
* JAX's ``jax.value_and_grad(f)`` / ``jax.grad(f)`` (keras.io's JAX training loop, with
  ``model.stateless_call`` inside ``f`` and ``optimizer.stateless_apply``): ``f`` runs as a
  tape block does (:class:`Differentiated`).
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, Optional

import libcst.matchers as m

from memlint.frontends.keras.values import (Array, Optimizer, Partial, Ref, Unknown,
                                            UserFunction, flatten_structure)
from memlint.ir import OptimizerSpec
from memlint.records import record

TRAIN_CALL = "train_call"
SHARED_STEP = "shared_step"
INPUT_GRADIENT = "input_gradient"
# a JAX step that holds the state it is given beside the one it returns: why ("" donated)
STATE_KEPT = "state_kept"
JIT = "jax.jit"
_NESTED = ("", None, None)  # in a tape block's calls: a tape block ran inside it
APPLYING = ("apply_gradients", "minimize", "apply", "stateless_apply")
_TAPES = ("tensorflow.GradientTape", "tensorflow.autodiff.GradientTape")
_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad")


def is_tape(name: Optional[str]) -> bool:
    """Whether a called name is TensorFlow's gradient tape."""
    return name in _TAPES


def trains(interp, kwargs: dict) -> bool:
    """A model call on data that is a training step's forward: ``training=True``, or inside a
    ``GradientTape`` block (and not ``training=False``), or in a file that runs torch's
    autograd outside a ``torch.no_grad()`` block (keras.io's torch training loop calls the
    model plainly, then ``loss.backward()``)."""
    flag = kwargs.get("training")
    if flag is True:
        return True
    return flag is None and (interp.tape_depth > 0 or (
        getattr(interp, "autograd", False) and not getattr(interp, "no_grad_depth", 0)))


def runs_autograd(source: str, module) -> bool:
    """Whether the file calls ``.backward()`` (on a torch loss), which differentiates what
    the model calls before it recorded (its text first: walking the module costs as much
    as parsing it)."""
    return ".backward(" in source and bool(
        m.findall(module, m.Call(func=m.Attribute(attr=m.Name("backward")))))


def is_no_grad(name: Optional[str]) -> bool:
    """Whether a called name is a torch block that records no autograd graph."""
    return name in _NO_GRAD


def record_call(interp, usage: dict, args: list, kwargs: dict, node, name: str,
                batch: Any = None) -> None:
    """Remember a training call of model ``name`` on a batch (its usage, as ``fit`` would
    be; ``batch``: the data it stands for, where not the value itself), and that the
    enclosing tape blocks run it."""
    value = args[0] if args else kwargs.get("inputs", kwargs.get("x"))
    usage.setdefault(TRAIN_CALL, []).append(([value if batch is None else batch], {},
                                             interp.location(node)))
    if getattr(interp, "differentiating", None):  # a JAX step: does its jit donate?
        jits = [j for j in interp.jits if j is not None]
        usage.setdefault(STATE_KEPT, []).append(
            jits[-1] if jits else f"the step jax differentiates at line "
                                  f"{interp.differentiating[-1]} is not jitted")
    for calls in interp.tape_calls:
        calls.append((name, usage, value))


@record(eq=False)
class Tape:
    """``tf.GradientTape()``: the training calls its block ran, (model name, usage, input)."""

    calls: list = field(default_factory=list)


def tape_method(interp, tape: Tape, method: str, args: list, kwargs: dict, node) -> Any:
    """``tape.gradient(target, sources)``: a source that is the input of a model call the
    block ran makes that model's step differentiate its input (``INPUT_GRADIENT``); so does
    a source of data that no call was given as it is (DeepDream's image, which the model
    is called on through ``tf.expand_dims``): its gradient flows through the models the
    block ran.  ``tape.watch(x)`` changes nothing memlint sizes."""
    if method == "gradient":
        sources = _objects(args[1] if len(args) > 1 else kwargs.get("sources"))
        where = interp.location(node)
        given = [(usage, value) for _, usage, value in tape.calls
                 if any(source is leaf for source in sources for leaf in _objects(value))]
        data = [source for source in sources if isinstance(source, Array)]
        if not given and data:
            given = [(usage, data) for _, usage, _ in tape.calls]
        for usage, value in given:
            usage.setdefault(INPUT_GRADIENT, []).append((where, value))
        return Unknown("gradients computed by a GradientTape")
    if method == "watch":
        return None
    return Unknown(f"GradientTape.{method}() is not evaluated")


def _objects(value: Any) -> list:
    """The leaves of ``value`` that are objects of their own (compared by identity): not
    None, numbers or strings, which the analysed code may share by chance."""
    return [leaf for leaf in flatten_structure(value)
            if leaf is not None and not isinstance(leaf, (bool, int, float, str))]


def applies_to(state, value: Any) -> bool:
    """Whether the code applies an optimizer to ``value`` itself (``opt.apply_gradients([(
    grad, image)])``: the image a style transfer optimises)."""
    leaves = _objects(value)
    return any(leaf is applied for leaf in leaves for applied in state.applied_values)


def tape_block(interp, where: str, run, tapes: tuple = ()) -> None:
    """``run()`` the body of a ``with tf.GradientTape()`` block (``where``: "under the
    GradientTape at line 85"); where it trains several models, or one several times, mark
    each one's usage with the step it shares.  The ``tapes`` the block opened keep its
    training calls (:func:`tape_method`)."""
    for outer in interp.tape_calls:  # a tape inside theirs: gradients of gradients
        if not any(c is _NESTED for c in outer):
            outer.append(_NESTED)
    interp.tape_calls.append([])
    try:
        run()
    finally:
        calls = interp.tape_calls.pop()
        nested = any(c is _NESTED for c in calls)
        calls = [c for c in calls if c is not _NESTED]
        for tape in tapes:
            tape.calls.extend(calls)
    counts: dict = {}
    for name, usage, _ in calls:
        counts.setdefault(id(usage), [name, usage, 0])[2] += 1
    if len(calls) < 2 and not (nested and calls):
        return
    told = " and ".join(f"{name} " + ("once" if n == 1 else f"{n} times")
                        for name, _, n in counts.values())
    # a tape inside the block keeps its backward for the outer one's (a gradient penalty):
    # the step is not bounded by its calls' own peaks (memory/shared_steps.py)
    shared = [] if nested else [(name, n) for name, _, n in counts.values()]
    text = f"the step {where} calls {told}" + (
        ", and a tape inside it takes gradients of gradients, whose memory memlint does not "
        "count" if nested else "")
    for _, usage, _ in counts.values():
        usage.setdefault(SHARED_STEP, []).append((text, shared))


@record(frozen=True)
class Differentiated:
    """``jax.value_and_grad(fn, has_aux=...)`` (``value`` True) or ``jax.grad(fn)``."""

    fn: Any
    value: bool
    has_aux: bool


def differentiated(name: str, args: list, kwargs: dict) -> Optional[Differentiated]:
    """What ``jax.value_and_grad(fn, ...)`` / ``jax.grad(fn, ...)`` makes, or None."""
    if name not in ("jax.value_and_grad", "jax.grad"):
        return None
    fn = args[0] if args else kwargs.get("fun")
    has_aux = kwargs.get("has_aux", False)
    if fn is None or not isinstance(has_aux, bool):
        return None
    return Differentiated(fn, name == "jax.value_and_grad", has_aux)


def jitted(fn: Any, kwargs: dict, line: int) -> Any:
    """``jax.jit(fn, donate_argnums=...)``, called or as a decorator (``@jax.jit``,
    ``@partial(jax.jit, donate_argnums=0)``): the function of the file, marked with whether
    the jit donates arguments (a step that donates none holds the state it is given beside
    the state it returns); anything else unchanged."""
    if not isinstance(fn, UserFunction):
        return fn
    donates = any(kwargs.get(k) not in (None, (), [])
                  for k in ("donate_argnums", "donate_argnames"))
    return replace(fn, jit="" if donates else f"jax.jit at line {line} donates no argument")


def jit_decorator(deco: Any) -> Optional[dict]:
    """The keyword arguments of a decorator that is ``jax.jit`` (bare, or through
    ``functools.partial``), or None for any other decorator."""
    if isinstance(deco, Ref) and deco.name == JIT:
        return {}
    if isinstance(deco, Partial) and isinstance(deco.func, Ref) and deco.func.name == JIT \
            and not deco.args:
        return dict(deco.kwargs)
    return None


def run_differentiated(interp, made: Differentiated, call, line: int) -> Any:
    """Call the function ``made`` differentiates (``call()`` runs it) as under a tape: its
    model calls are training steps.  What JAX returns: ``(value, grads)`` or ``grads``
    (``(grads, aux)`` with ``has_aux``), the gradients not known."""
    result = []
    interp.tape_depth += 1
    interp.differentiating.append(line)
    try:
        tape_block(interp, f"{'jax.value_and_grad' if made.value else 'jax.grad'} "
                           f"differentiates at line {line}", lambda: result.append(call()))
    finally:
        interp.tape_depth -= 1
        interp.differentiating.pop()
    grads = Unknown("gradients computed by JAX")
    if made.value:
        return (result[0], grads)
    if made.has_aux and isinstance(result[0], tuple) and len(result[0]) == 2:
        return (grads, result[0][1])
    return grads


def record_optimizer(interp, optimizer: Any, method: str, node, args: list = ()) -> bool:
    """``optimizer.apply_gradients(...)``: remember which optimizer the code applies, and
    to what (:func:`applies_to`)."""
    if not isinstance(optimizer, Optimizer) or method not in APPLYING:
        return False
    interp.state.applied_optimizers.append((optimizer, interp.location(node), method))
    interp.state.applied_values.extend(_objects(list(args)))
    return True


def applied_optimizer(state) -> Optional[OptimizerSpec]:
    """The one optimizer the file applies to gradients, with where; None when it applies none
    or several different ones."""
    found = {id(opt): (opt, loc, method) for opt, loc, method in state.applied_optimizers}
    if len(found) != 1:
        return None
    optimizer, loc, method = next(iter(found.values()))
    spec = optimizer.spec
    return OptimizerSpec(spec.name, dict(spec.options),
                         f"the optimizer {method}() applies at line {loc.line}")
