r"""Structural non-zeros of a traced function's outputs, by abstract interpretation of its
jaxpr: :func:`nonzero_pattern`.

Every intermediate value is either **known** (a constant of the program: an `iota`, an
identity matrix, a concrete parameter, a literal; evaluated exactly) or a **mask**: a
boolean array, False only where the value is zero for *every* value of the function's
arguments. The arguments are masks of all True (any value). Each primitive maps the masks of
its operands to a mask of its result that can only over-approximate the non-zeros:

- sums, differences, maxima and data movement (slices, reshapes, broadcasts, gathers,
  scatters, concatenations, selections) take the union of the non-zeros that reach an
  entry; products the intersection of their factors'; a dot product is the Boolean
  matrix product of its operands' masks;
- functions that vanish at zero ($\sin$, $\sqrt{\ }$, $\tanh$, $x^k$, a quotient's
  numerator, ...) keep their argument's mask; any other function ($\cos$, $\exp$, a
  comparison, a linear solve, ...) and any primitive this module does not know gives all
  True;
- calls (`jit`, `custom_jvp`, `custom_vjp`, `checkpoint`) are interpreted inside, a `cond`
  with an unknown branch takes the union of its branches, `scan` and `while` loops iterate
  their body's masks to a fixed point.

So an entry reported False is zero for every argument (`jnp.where(q[0] > 0, q, 0.0)` keeps
both branches' non-zeros; cancellation such as $x - x$ is not seen, which only adds
entries). This replaces sampling a function at random points, which can miss an entry that
vanishes at the samples (a piecewise model) and needs every parameter to be an array.
Its one blind spot is IEEE arithmetic on non-finite values: a structural zero times an
infinity is NaN, counted here as zero.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from ukjax._sparsity import nonzero_pattern
    >>> def jac(q):  # a chain's constraint Jacobian
    ...     return jax.jacfwd(lambda x: jnp.sin(x[1:] - x[:-1]))(q)
    >>> nonzero_pattern(jac, jax.ShapeDtypeStruct((4,), jnp.float32)).astype(int)
    array([[1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np


class Known:
    """A value of the program that does not depend on the arguments (evaluated)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = np.asarray(value)

    def mask(self) -> np.ndarray:
        v = self.value
        if v.dtype == np.bool_:
            return v.copy()
        return (v != 0) | ~np.isfinite(v) if np.issubdtype(v.dtype, np.inexact) else v != 0


Value = Any  # Known | np.ndarray (a mask)


def _mask(x: Value) -> np.ndarray:
    return x.mask() if isinstance(x, Known) else x


def _full(aval) -> np.ndarray:
    return np.ones(aval.shape, bool)


def _as_operand(x: Value, aval) -> np.ndarray:
    """A mask as an array of the operand's dtype (0/1), for a primitive applied to masks."""
    return _mask(x).astype(aval.dtype)


# --------------------------------------------------------------------- elementwise rules
# f(0) = 0: the result's non-zeros are the argument's (the first operand's for div/rem).
_KEEP_FIRST = frozenset(
    {
        "neg", "sin", "tan", "sinh", "tanh", "asin", "atan", "asinh", "atanh", "sqrt",
        "cbrt", "abs", "sign", "floor", "ceil", "round", "expm1", "log1p", "erf", "square",
        "real", "imag", "conj", "copy", "copy_p", "reduce_precision", "convert_element_type",
        "div", "rem", "stop_gradient", "optimization_barrier",
    }
)  # fmt: skip
# a sum-like result: non-zero where any operand is
_UNION = frozenset({"add", "add_any", "sub", "max", "min", "atan2", "or", "nextafter"})
# a product: non-zero only where every operand is
_INTERSECTION = frozenset({"mul", "and"})
_ELEMENTWISE = _KEEP_FIRST | _UNION | _INTERSECTION | {"integer_pow"}


def _broadcast(masks: Sequence[np.ndarray], shape) -> list[np.ndarray]:
    return [np.broadcast_to(m, shape) for m in masks]


def _elementwise(name: str, ins: list[Value], eqn) -> np.ndarray | None:
    if name not in _ELEMENTWISE:
        return None
    shape = eqn.outvars[0].aval.shape
    masks = _broadcast([_mask(x) for x in ins], shape)
    if name in _KEEP_FIRST:
        return masks[0].copy()
    if name == "integer_pow":
        return masks[0].copy() if eqn.params["y"] > 0 else np.ones(shape, bool)
    if name in _UNION:
        return np.logical_or.reduce(masks) if len(masks) > 1 else masks[0].copy()
    return np.logical_and.reduce(masks) if len(masks) > 1 else masks[0].copy()


# ------------------------------------------------------------------ structural rules
def _broadcast_in_dim(m, params):
    shape, dims = params["shape"], params["broadcast_dimensions"]
    view = [1] * len(shape)
    for src, dst in enumerate(dims):
        view[dst] = m.shape[src]
    return np.broadcast_to(m.reshape(view), shape)


def _slice(m, params):
    strides = params["strides"] or (1,) * m.ndim
    index = tuple(
        slice(a, b, s) for a, b, s in zip(params["start_indices"], params["limit_indices"], strides)
    )
    return m[index]


def _pad(m, params, pad_mask):
    config = params["padding_config"]
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        return None
    extent = lambda d, interior: (d - 1) * (interior + 1) + 1 if d else 0
    shape = [lo + hi + extent(d, i) for (lo, hi, i), d in zip(config, m.shape)]
    out = np.broadcast_to(pad_mask, shape).copy()
    index = tuple(slice(lo, lo + extent(d, i), i + 1) for (lo, _, i), d in zip(config, m.shape))
    out[index] = m
    return out


def _dot_general(lhs, rhs, params):
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [next(letters) for _ in range(lhs.ndim)]
    rs = [next(letters) for _ in range(rhs.ndim)]
    for i, j in zip(lc, rc):
        rs[j] = ls[i]
    for i, j in zip(lb, rb):
        rs[j] = ls[i]
    batch = [ls[i] for i in lb]
    free_l = [ls[i] for i in range(lhs.ndim) if i not in lc and i not in lb]
    free_r = [rs[j] for j in range(rhs.ndim) if j not in rc and j not in rb]
    spec = f"{''.join(ls)},{''.join(rs)}->{''.join(batch + free_l + free_r)}"
    return np.einsum(spec, lhs.astype(np.int64), rhs.astype(np.int64)) > 0


def _reduce(kind):
    def rule(m, params):
        return kind(m, axis=tuple(params["axes"]))

    return rule


def _cumulative(kind):
    def rule(m, params):
        axis = params["axis"]
        if params.get("reverse", False):
            return np.flip(kind.accumulate(np.flip(m, axis), axis=axis), axis)
        return kind.accumulate(m, axis=axis)

    return rule


# data movement: the same NumPy operation on a mask and on a known value
_MOVEMENT: MappingProxyType[str, Callable] = MappingProxyType(
    {
        "broadcast_in_dim": _broadcast_in_dim,
        "reshape": lambda m, p: m.reshape(p["new_sizes"]),
        "transpose": lambda m, p: np.transpose(m, p["permutation"]),
        "squeeze": lambda m, p: np.squeeze(m, tuple(p["dimensions"])),
        "expand_dims": lambda m, p: np.expand_dims(m, tuple(p["dimensions"])),
        "rev": lambda m, p: np.flip(m, tuple(p["dimensions"])),
        "slice": _slice,
    }
)
_UNARY_STRUCTURAL: MappingProxyType[str, Callable] = MappingProxyType(
    {
        **_MOVEMENT,
        "reduce_sum": _reduce(np.any),
        "reduce_max": _reduce(np.any),
        "reduce_min": _reduce(np.any),
        "reduce_or": _reduce(np.any),
        "reduce_prod": _reduce(np.all),
        "reduce_and": _reduce(np.all),
        "cumsum": _cumulative(np.logical_or),
        "cummax": _cumulative(np.logical_or),
        "cummin": _cumulative(np.logical_or),
        "cumprod": _cumulative(np.logical_and),
    }
)

# primitives applied to the masks themselves (as 0/1 arrays of the operand's dtype), with
# the operands at `index` positions required to be known (indices, start positions)
_ON_MASKS: MappingProxyType[str, tuple[int, ...]] = MappingProxyType(
    {
        "gather": (1,),
        "dynamic_slice": (1, 2, 3, 4, 5, 6, 7, 8),
        "dynamic_update_slice": (2, 3, 4, 5, 6, 7, 8, 9),
        "scatter": (1,),
        "scatter-add": (1,),
        "scatter_add": (1,),
    }
)


def _on_masks(eqn, ins: list[Value]) -> list[np.ndarray] | None:
    """A data-movement primitive applied to 0/1 masks (its index operands known)."""
    index = _ON_MASKS[eqn.primitive.name]
    operands = []
    for k, (x, var) in enumerate(zip(ins, eqn.invars)):
        if k in index:
            if not isinstance(x, Known):
                return None
            operands.append(x.value)
        else:
            operands.append(_as_operand(x, var.aval))
    with jax.ensure_compile_time_eval():
        out = eqn.primitive.bind(*operands, **eqn.params)
    outs = out if eqn.primitive.multiple_results else [out]
    return [np.asarray(o) != 0 for o in outs]


def _structural(eqn, ins: list[Value]) -> list[np.ndarray] | None:
    """Rules for movement, reductions, selection and concatenation; None if none applies."""
    name, params = eqn.primitive.name, eqn.params
    rule = _UNARY_STRUCTURAL.get(name)
    if rule is not None:
        return [np.asarray(rule(_mask(ins[0]), params), bool)]
    if name == "concatenate":
        return [np.concatenate([_mask(x) for x in ins], axis=params["dimension"])]
    if name == "split":
        cuts = np.cumsum(params["sizes"])[:-1]
        return [p.copy() for p in np.split(_mask(ins[0]), cuts, axis=params["axis"])]
    if name == "pad":
        out = _pad(_mask(ins[0]), params, _mask(ins[1]))
        return None if out is None else [out]
    if name == "dot_general":
        return [_dot_general(_mask(ins[0]), _mask(ins[1]), params)]
    if name == "select_n":
        return [_select(ins, eqn.outvars[0].aval.shape)]
    if name in _ON_MASKS:
        return _on_masks(eqn, ins)
    return None


def _select(ins: list[Value], shape) -> np.ndarray:
    pred, cases = ins[0], [np.broadcast_to(_mask(x), shape) for x in ins[1:]]
    if isinstance(pred, Known):
        which = np.broadcast_to(pred.value.astype(np.int64), shape)
        return np.choose(which, cases)
    return np.logical_or.reduce(cases) if len(cases) > 1 else cases[0].copy()


# ------------------------------------------------------------------------- the interpreter
def _read(env: dict, v) -> Value:
    if isinstance(v, jcore.Literal):
        return Known(v.val)
    return env[v]


def _iota(params) -> np.ndarray:
    shape, dim = params["shape"], params["dimension"]
    view = [1] * len(shape)
    view[dim] = shape[dim]
    values = np.arange(shape[dim], dtype=params["dtype"]).reshape(view)
    return np.broadcast_to(values, shape)


def _convert(x: np.ndarray, params) -> np.ndarray | None:
    target = np.dtype(params["new_dtype"])
    if np.issubdtype(x.dtype, np.inexact) and not np.issubdtype(target, np.inexact):
        return None  # float to integer: XLA's rounding and saturation, left to XLA
    return x.astype(target)


def _select_n(pred, *cases):
    return np.choose(pred.astype(np.int64), np.broadcast_arrays(*cases))


# Known values computed with NumPy where NumPy computes exactly what XLA does (integer and
# boolean arithmetic, IEEE sums and products of operands of one dtype, data movement):
# binding the primitive instead compiles an XLA program per primitive and shape, tens of
# milliseconds each at a process's first call (the identity matrices of a model's M).
_NUMPY: MappingProxyType[str, Callable] = MappingProxyType(
    {
        "add": np.add, "add_any": np.add, "sub": np.subtract, "mul": np.multiply,
        "neg": np.negative, "max": np.maximum, "min": np.minimum,
        "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal, "and": np.bitwise_and,
        "or": np.bitwise_or, "not": np.invert, "select_n": _select_n,
    }
)  # fmt: skip
_NUMPY_PARAMS: MappingProxyType[str, Callable] = MappingProxyType(
    {**_MOVEMENT, "convert_element_type": _convert}
)


def _numpy_known(eqn, ins: list[Known]) -> list[Value] | None:
    """The equation evaluated with NumPy (:data:`_NUMPY`), or None where it is not."""
    name, params, values = eqn.primitive.name, eqn.params, [x.value for x in ins]
    dtypes = {v.dtype for v in values[1:] if name == "select_n"} or {v.dtype for v in values}
    if name in _NUMPY and len(dtypes) <= 1:
        out = _NUMPY[name](*values)
    elif name in _NUMPY_PARAMS and len(values) == 1:
        out = _NUMPY_PARAMS[name](values[0], params)
    elif name == "iota":
        out = _iota(params)
    elif name == "concatenate" and len(dtypes) == 1:
        out = np.concatenate(values, axis=params["dimension"])
    elif name == "split":
        cuts = np.cumsum(params["sizes"])[:-1]
        return [Known(p) for p in np.split(values[0], cuts, axis=params["axis"])]
    else:
        return None
    if out is None:
        return None
    aval = eqn.outvars[0].aval
    out = np.asarray(out)
    if out.shape != aval.shape or out.dtype != aval.dtype:
        return None  # not what the primitive gives: let XLA evaluate it
    return [Known(out)]


def _evaluate_known(eqn, ins: list[Known]) -> list[Value] | None:
    """Evaluate an equation all of whose operands are known (None if it cannot be): with
    NumPy where it computes exactly the same (:func:`_numpy_known`), else by binding it."""
    if eqn.effects:
        return None
    fast = _numpy_known(eqn, ins)
    if fast is not None:
        return fast
    try:
        with jax.ensure_compile_time_eval():
            out = eqn.primitive.bind(*[x.value for x in ins], **eqn.params)
    except Exception:  # noqa: BLE001 - a constant that cannot be folded stays unknown
        return None
    outs = out if eqn.primitive.multiple_results else [out]
    return [Known(np.asarray(o)) for o in outs]


def _sub_jaxpr(eqn):
    """The jaxpr a call-like equation runs on its operands, with its constants."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = eqn.params.get(key)
        if isinstance(sub, jcore.ClosedJaxpr):
            jaxpr, consts = sub.jaxpr, sub.consts
        elif isinstance(sub, jcore.Jaxpr):
            jaxpr, consts = sub, ()
        else:
            continue
        if len(jaxpr.invars) == len(eqn.invars) and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, consts
    return None


def _join(a: Value, b: Value) -> np.ndarray:
    return _mask(a) | _mask(b)


def _cond(eqn, ins: list[Value]) -> list[Value]:
    branches = eqn.params["branches"]
    index, operands = ins[0], ins[1:]
    if isinstance(index, Known):
        k = int(np.clip(index.value, 0, len(branches) - 1))
        return _interpret(branches[k].jaxpr, branches[k].consts, operands)
    outs = [_interpret(b.jaxpr, b.consts, operands) for b in branches]
    return [np.logical_or.reduce([_mask(o[i]) for o in outs]) for i in range(len(eqn.outvars))]


def _fixed_point(body, consts, carry: list[np.ndarray], extra: list[Value], n_out_carry: int):
    """Iterate the body's carry masks (with the loop-invariant `extra` operands) until they
    stop growing (masks only grow, so this ends); the last body outputs."""
    for _ in range(64):
        outs = _interpret(body.jaxpr, body.consts, [*consts, *carry, *extra])
        grown = [c | _mask(o) for c, o in zip(carry, outs[:n_out_carry])]
        if all(np.array_equal(g, c) for g, c in zip(grown, carry)):
            return carry, outs
        carry = grown
    return [np.ones_like(c) for c in carry], None


def _scan(eqn, ins: list[Value]) -> list[Value] | None:
    p = eqn.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    consts, carry, xs = (
        ins[:n_consts],
        ins[n_consts : n_consts + n_carry],
        ins[n_consts + n_carry :],
    )
    x_slices = [np.any(_mask(x), axis=0) if _mask(x).ndim else _mask(x) for x in xs]
    carry, outs = _fixed_point(p["jaxpr"], consts, [_mask(c) for c in carry], x_slices, n_carry)
    if outs is None:
        return None
    ys = [
        np.broadcast_to(_mask(y), v.aval.shape).copy()
        for y, v in zip(outs[n_carry:], eqn.outvars[n_carry:])
    ]
    return [*carry, *ys]


def _while(eqn, ins: list[Value]) -> list[Value] | None:
    p = eqn.params
    n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
    body_consts, carry = ins[n_cond : n_cond + n_body], ins[n_cond + n_body :]
    carry, outs = _fixed_point(
        p["body_jaxpr"], body_consts, [_mask(c) for c in carry], [], len(carry)
    )
    return None if outs is None else carry


def _apply(eqn, ins: list[Value]) -> list[Value] | None:
    """The abstract values of an equation's results (None: unknown primitive)."""
    name = eqn.primitive.name
    if all(isinstance(x, Known) for x in ins):
        known = _evaluate_known(eqn, ins)
        if known is not None:
            return known
    if eqn.effects:
        return None
    sub = _sub_jaxpr(eqn)
    if sub is not None and name not in ("scan", "while", "cond"):
        return _interpret(sub[0], sub[1], ins)
    if name == "cond":
        return _cond(eqn, ins)
    if name == "scan":
        return _scan(eqn, ins)
    if name == "while":
        return _while(eqn, ins)
    if len(eqn.outvars) == 1:
        out = _elementwise(name, ins, eqn)
        if out is not None:
            return [out]
    return _structural(eqn, ins)


def _interpret(jaxpr, consts: Sequence[Any], args: Sequence[Value]) -> list[Value]:
    env: dict = {}
    for v, c in zip(jaxpr.constvars, consts):
        env[v] = _constant(c, v.aval)
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        ins = [_read(env, v) for v in eqn.invars]
        outs = _apply(eqn, ins)
        if outs is None:
            outs = [_full(v.aval) for v in eqn.outvars]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o if isinstance(o, Known) else np.broadcast_to(o, v.aval.shape)
    return [_read(env, v) for v in jaxpr.outvars]


def _constant(c, aval) -> Value:
    """A jaxpr constant: known if it has a value now (a traced one from an enclosing
    transformation is any value)."""
    try:
        return Known(np.asarray(c))
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return _full(aval)
    except TypeError:
        return _full(aval)


def nonzero_pattern(fn: Callable, *args) -> Any:
    """`fn(*args)`'s output with each array replaced by a boolean mask of the entries that
    can be non-zero for some value of the arguments (`args`: arrays or
    `jax.ShapeDtypeStruct`s; only their shapes and dtypes are used). Values `fn` closes
    over are used as they are (constants of the program), or as any value when they are
    traced by an enclosing transformation."""
    closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    masks = _interpret(closed.jaxpr, closed.consts, [_full(v.aval) for v in closed.jaxpr.invars])
    treedef = jax.tree_util.tree_structure(shapes)
    return jax.tree_util.tree_unflatten(treedef, [np.array(_mask(m), bool) for m in masks])
