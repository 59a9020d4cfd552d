"""Expressions: what each kind of Python expression in model code evaluates to.

:class:`ExpressionEvaluator` is the expression half of the interpreter (the statement half,
with scopes, budgets and function calls, is :class:`~.interpreter.Interpreter`, which
inherits it).  Arithmetic is guarded so huge results become unknown values instead of
exhausting memory.
"""

from __future__ import annotations

import operator
from typing import Any, Optional

import libcst as cst

from memlint.frontends.keras import calls, devices, models, star_imports
from memlint.frontends.keras import arrays, batches, frames
from memlint.frontends.keras.state import MAX_SEQUENCE
from memlint.frontends.keras.values import OPEN, Array, Batches, LoopIndex
from memlint.frontends.keras.values import (FunctionalModel, LayerRef, ModelLayer, OpaqueLayer,
                                            Ref, SequentialModel, Tensor, Unknown,
                                            UserFunction, is_hashable, is_unknown)

MAX_INT_BITS = 256  # larger integer results are treated as unknown
MAX_LOOP_ITERATIONS = 10_000  # iterations of one loop or comprehension

_BINARY = {
    cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
    cst.Divide: operator.truediv, cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod,
    cst.Power: operator.pow,
}
# Python operator -> the Keras 3 op class that KerasTensor.__add__ & co. create
_TENSOR_OPS = {
    cst.Add: "Add", cst.Subtract: "Subtract", cst.Multiply: "Multiply", cst.Divide: "TrueDivide",
    cst.FloorDivide: "FloorDivide", cst.Modulo: "Mod", cst.Power: "Power",
}
_TENSOR_COMPARE = {
    cst.Equal: "equal", cst.NotEqual: "not_equal", cst.LessThan: "less",
    cst.LessThanEqual: "less_equal", cst.GreaterThan: "greater",
    cst.GreaterThanEqual: "greater_equal",
}
_COMPARE = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
    cst.Is: operator.is_, cst.IsNot: operator.is_not,
}


_MISSING = object()


def _no_eval(self, node) -> Unknown:
    return Unknown(f"{type(node).__name__} expressions are not evaluated")


_METHODS: dict = {}  # (evaluator class, node type) -> the method evaluating it


class ExpressionEvaluator:
    """Evaluates libcst expressions to abstract values (needs the interpreter's scope)."""

    # ------------------------------------------------------------------ expressions

    def eval(self, node: cst.CSTNode) -> Any:
        self.tick(node)
        key = (type(self), type(node))
        method = _METHODS.get(key)
        if method is None:
            method = _METHODS[key] = getattr(type(self), f"eval_{key[1].__name__}", _no_eval)
        return method(self, node)

    def literal(self, node):
        """A number literal's value (libcst computes literals' values with ``ast.literal_eval`` each time it
        is asked: kept per node; the node is the key, so it stays alive)."""
        found = self.literals.get(node, _MISSING)
        if found is _MISSING:
            found = self.literals[node] = node.evaluated_value
        return found

    def eval_Integer(self, node):
        return self.literal(node)

    def eval_Float(self, node):
        return self.literal(node)

    def eval_Imaginary(self, node):
        return Unknown("complex numbers are not evaluated")

    def eval_SimpleString(self, node):
        value = self.literals.get(node, _MISSING)
        if value is _MISSING:
            try:
                value = node.evaluated_value
            except Exception:  # malformed escapes
                value = None
            self.literals[node] = value
        if value is None:
            return Unknown("string literal could not be read")
        return value if isinstance(value, str) else Unknown("bytes literal")

    def eval_ConcatenatedString(self, node):
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        return Unknown("string concatenation with unknown parts")

    def eval_FormattedString(self, node):
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
            else:
                value = self.eval(part.expression)
                spec = self._format_spec(part.format_spec)
                if is_unknown(value) or spec is None or part.conversion:
                    return Unknown("f-string with parts not known statically")
                if not isinstance(value, (int, float, str)) and spec:
                    return Unknown("f-string format spec on a value that is not a number or string")
                try:
                    out.append(format(value, spec) if spec else str(value))
                except (ValueError, TypeError):
                    return Unknown("f-string format spec Python would reject")
        return "".join(out)

    def _format_spec(self, parts) -> Optional[str]:
        """The literal text of an f-string format spec (``02d``), or None when it has nested
        fields or a field width large enough to build a huge string."""
        if not parts:
            return ""
        if not all(isinstance(p, cst.FormattedStringText) for p in parts):
            return None
        spec = "".join(p.value for p in parts)
        return spec if calls.safe_format("{:" + spec + "}") else None

    def eval_Name(self, node):
        name = node.value
        if name in self.scope:
            return self.scope[name]
        for scope in self.outer:
            if name in scope:
                return scope[name]
        if name in self.globals:
            return self.globals[name]
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        if name in calls.BUILTINS:
            return Ref(f"builtins.{name}")
        found = star_imports.lookup(self.globals, name)
        if found is not None:  # ``from some_library import *``
            return found
        return Unknown(f"name '{name}' is not defined in this file")

    def eval_Attribute(self, node):
        base = self.eval(node.value)
        return calls.get_attribute(self, base, node.attr.value, node)

    def eval_Tuple(self, node):
        return tuple(self._elements(node.elements))

    def eval_List(self, node):
        return list(self._elements(node.elements))

    def _elements(self, elements):
        out = []
        for el in elements:
            value = self.eval(el.value)
            if isinstance(el, cst.StarredElement):
                if isinstance(value, (list, tuple)):
                    out.extend(value)
                else:
                    out.append(Unknown("starred element not known statically"))
            else:
                out.append(value)
        return out

    def eval_Dict(self, node):
        out = {}
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                key = self.eval(el.key)
                if not is_hashable(key):
                    return Unknown("dict with keys not known statically")
                out[key] = self.eval(el.value)
            else:
                value = self.eval(el.value)
                if not isinstance(value, dict):
                    return Unknown("dict unpacking of a value not known statically")
                out.update(value)
        return out

    def eval_Set(self, node):
        items = self._elements(node.elements)
        if not all(_is_plain(v) and is_hashable(v) for v in items):
            return Unknown("a set of values not known statically")
        return frozenset(items)  # ``x in {"a", None}``: membership is what code asks of it

    def eval_ListComp(self, node):
        return self._comprehension(node, list)

    def eval_GeneratorExp(self, node):
        return self._comprehension(node, list)

    def eval_DictComp(self, node):
        return self._comprehension(node, dict)

    def _comprehension(self, node, build):
        # a comprehension has its own scope: its loop variables do not leak
        saved = (self.scope, self.outer, self.global_names)
        self.outer = (self.scope,) + self.outer if self.scope is not self.globals else self.outer
        self.scope, self.global_names = {}, set()
        out = []
        try:
            if isinstance(node, cst.DictComp):
                ok = self._comp_loop(node.for_in, lambda: out.append(
                    (self.eval(node.key), self.eval(node.value))))
                ok = ok and all(is_hashable(key) for key, _ in out)
            else:
                ok = self._comp_loop(node.for_in, lambda: out.append(self.eval(node.elt)))
        finally:
            self.scope, self.outer, self.global_names = saved
        return build(out) if ok else Unknown("comprehension over values not known statically")

    def _comp_loop(self, for_in, emit) -> bool:
        items = self.iterate(self.eval(for_in.iter), for_in)
        if items is None:
            return False
        for count, item in enumerate(items):
            if count >= MAX_LOOP_ITERATIONS:
                return False
            self.assign(for_in.target, item)
            tests = [self.eval(cond.test) for cond in for_in.ifs]
            if not all(has_truth(test) for test in tests):
                return False
            if not all(tests):
                continue
            if for_in.inner_for_in is not None:
                if not self._comp_loop(for_in.inner_for_in, emit):
                    return False
            else:
                emit()
        return True

    def eval_IfExp(self, node):
        test = self.eval(node.test)
        if not has_truth(test):
            return Unknown("conditional expression on a value not known statically")
        return self.eval(node.body) if test else self.eval(node.orelse)

    def eval_UnaryOperation(self, node):
        value = self.eval(node.expression)
        if isinstance(node.operator, cst.Not):
            return Unknown("not of an unknown value") if not has_truth(value) else not value
        if isinstance(value, Tensor) and isinstance(node.operator, cst.Minus):
            return models.tensor_operation(self, "Negative", [value], node)
        if isinstance(value, Array):  # -x, +x, ~mask on NumPy data
            return arrays.unary(type(node.operator).__name__, value)
        if not isinstance(value, (int, float)):
            return Unknown("unary operation on a value not known statically")
        if isinstance(node.operator, cst.Minus):
            return -value
        if isinstance(node.operator, cst.Plus):
            return +value
        return Unknown("bitwise operations are not evaluated")

    def eval_BinaryOperation(self, node):
        left = self.eval(node.left)
        right = self.eval(node.right)
        return self.binary(left, right, node.operator, node)

    def binary(self, left: Any, right: Any, op_node: cst.CSTNode, node: cst.CSTNode) -> Any:
        """``left <op> right`` on plain values, guarded against huge results."""
        if isinstance(left, LoopIndex) or isinstance(right, LoopIndex):
            return _shifted_index(left, right, op_node)
        if isinstance(left, Batches) or isinstance(right, Batches):
            return batches.run_on([left, right], lambda both: self.binary(
                both[0], both[1], op_node, node), "an operator")
        if isinstance(left, Tensor) or isinstance(right, Tensor):
            if isinstance(op_node, _aug_base(cst.MatrixMultiply)):  # q @ k: ops.matmul
                return models.apply_operation(self, "keras.ops.matmul", [left, right], {}, node)
            op_type = next((name for cls, name in _TENSOR_OPS.items()
                            if isinstance(op_node, _aug_base(cls))), None)
            if op_type is not None:
                return models.tensor_operation(self, op_type, [left, right], node)
            return Tensor(None, reason="operator on tensors not modelled")
        if isinstance(left, frames.Frame) or isinstance(right, frames.Frame):  # pandas
            if isinstance(op_node, _aug_base(cst.MatrixMultiply)):
                return Unknown("a matrix product of tables is not evaluated")
            return frames.binary(left, right)
        if isinstance(left, Array) or isinstance(right, Array):  # NumPy data: shape and dtype
            op_type = next((name for cls, name in _TENSOR_OPS.items()
                            if isinstance(op_node, _aug_base(cls))), None)
            return arrays.binary(op_type, left, right, isinstance(op_node, cst.BaseAugOp))
        op = next((fn for cls, fn in _BINARY.items() if isinstance(op_node, _aug_base(cls))),
                  None)
        if op is None:
            return Unknown("operator not evaluated")
        if devices.is_device_value(left) or devices.is_device_value(right):
            found = devices.multiply(left, right) if op is operator.mul else devices.NOT_DEVICES
            return found if found is not devices.NOT_DEVICES else \
                Unknown("arithmetic on the number of replicas, which the code does not state")
        if not (_is_plain(left) and _is_plain(right)) and not _is_sequence_op(op, left, right):
            return Unknown("arithmetic on values not known statically")
        if op is operator.pow and isinstance(left, int) and isinstance(right, int):
            if right < 0 or right * max(abs(left), 2).bit_length() > MAX_INT_BITS:
                return Unknown("power too large to evaluate")
        size = 0
        if op is operator.mul:
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                    size = len(seq) * max(n, 0)
        elif op is operator.add and isinstance(left, (str, list, tuple)) \
                and isinstance(right, (str, list, tuple)):
            size = len(left) + len(right)
        elif op is operator.mod and isinstance(left, str):
            if not calls.safe_format(left):
                return Unknown("string formatting with a huge field width is not evaluated")
            size = len(left) + len(str(right)) if _is_plain(right) else len(left)
        if size > MAX_SEQUENCE:
            return Unknown("sequence too large to evaluate")
        if size and not self.state.allocate(size):
            self.state.note_budget(self.location(node), "the analysed code builds very large "
                                   "lists or strings; they are not evaluated")
            return Unknown("sequence too large to evaluate")
        if left is None or right is None:  # ``h * 3`` with h from ops.shape() of an open axis
            return Unknown("arithmetic on None, a size known only when the data arrives "
                           "(an open axis of a tensor)")
        try:
            result = op(left, right)
        except Exception:
            return Unknown("arithmetic error (e.g. division by zero) in the analysed code")
        if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
            return Unknown("integer too large to evaluate")
        if isinstance(result, (str, list, tuple)) and len(result) > MAX_SEQUENCE:
            return Unknown("sequence too large to evaluate")
        return result

    def eval_BooleanOperation(self, node):
        left = self.eval(node.left)
        if not has_truth(left):
            return Unknown("boolean operation on a value not known statically")
        if isinstance(node.operator, cst.And):
            return self.eval(node.right) if left else left
        return left if left else self.eval(node.right)

    def eval_Comparison(self, node):
        left = self.eval(node.left)
        for target in node.comparisons:
            right = self.eval(target.comparator)
            if (isinstance(left, Tensor) or isinstance(right, Tensor)) and \
                    len(node.comparisons) == 1 and type(target.operator) in _TENSOR_COMPARE:
                # ``mask != 0``: the operation of that name (Keras's tensors define them)
                return models.apply_operation(
                    self, "keras.ops." + _TENSOR_COMPARE[type(target.operator)],
                    [left, right], {}, node)
            if isinstance(left, Array) or isinstance(right, Array):
                return _array_comparison(left, right, target.operator, len(node.comparisons))
            if (isinstance(left, frames.Frame) or isinstance(right, frames.Frame)) and \
                    len(node.comparisons) == 1 and type(target.operator) in _TENSOR_COMPARE:
                return frames.binary(left, right)  # ``df["x"] > 0``: a mask of its shape
            if isinstance(target.operator, (cst.Is, cst.IsNot)) and _is_known_object(left) \
                    and _is_known_object(right) and (left is None or right is None
                                                      or not _is_plain(left)):
                # ``self.drop is not None``: identity of objects the analysis made itself
                same = left is right
                if same == isinstance(target.operator, cst.IsNot):
                    return False
                left = right
                continue
            if _is_type(left) or _is_type(right):  # ``type(x) is list``, ``in (list, tuple)``
                found = _type_comparison(left, right, target.operator)
                if found is not True:
                    return found
                left = right
                continue
            if not (_is_plain(left) and _is_plain(right)):
                return Unknown("comparison of values not known statically")
            op = next((fn for cls, fn in _COMPARE.items() if isinstance(target.operator, cls)),
                      None)
            if op in (operator.is_, operator.is_not) and _is_scalar(left) \
                    and _is_scalar(right):
                # ``mode is 'th'``: CPython interns identifier-like strings and small ints,
                # so the code means ``==`` (of the same type: ``1 is True`` stays false)
                op = _same_scalar if op is operator.is_ else _other_scalar
            if op is None:
                return Unknown("comparison operator not evaluated")
            try:
                if not op(left, right):
                    return False
            except Exception:
                return Unknown("comparison failed")
            left = right
        return True

    def eval_Subscript(self, node):
        base = self.eval(node.value)
        if isinstance(base, Tensor):
            key = tuple(self._index(element.slice) for element in node.slice)
            if any(is_unknown(k) for k in key):
                return Unknown("tensor index not known statically")
            return models.apply_operation(self, "operator.getitem",
                                          [base, key if len(key) > 1 else key[0]], {}, node)
        if isinstance(base, Array) or frames.is_frame(base):  # x[..., np.newaxis], x[idx]
            # a slice bound not known statically leaves that axis's length open
            key = tuple(self._index(element.slice, open_bounds=True) for element in node.slice)
            return calls.subscript(base, key if len(key) > 1 else key[0])
        if len(node.slice) != 1:
            return Unknown("multi-dimensional subscript")
        sl = node.slice[0].slice
        if isinstance(sl, cst.Index):
            key = self.eval(sl.value)
            return calls.subscript(base, key, self.lookup_failed)
        lower = self.eval(sl.lower) if sl.lower is not None else None
        upper = self.eval(sl.upper) if sl.upper is not None else None
        step = self.eval(sl.step) if sl.step is not None else None
        if any(is_unknown(v) for v in (lower, upper, step)):
            return Unknown("slice bounds not known statically")
        return calls.subscript(base, slice(lower, upper, step))

    def _index(self, sl, open_bounds: bool = False) -> Any:
        """One element of a subscript: a value (``0``, ``None``, ``...``) or a slice; with
        ``open_bounds`` (NumPy and pandas data) a slice whose bounds are not known
        statically keeps them as :data:`~.values.OPEN`, for an axis of open length."""
        if isinstance(sl, cst.Index):
            if isinstance(sl.value, cst.Ellipsis):
                return Ellipsis
            return self.eval(sl.value)
        bounds = [self.eval(b) if b is not None else None for b in (sl.lower, sl.upper, sl.step)]
        if any(is_unknown(b) or not (b is None or isinstance(b, int)) for b in bounds):
            if open_bounds and not is_unknown(bounds[2]) and bounds[2] in (None, 1):
                # a loop's symbolic index stays: two of them fix the slice's length
                return slice(*(b if isinstance(b, LoopIndex) else OPEN if is_unknown(b) or not
                               (b is None or isinstance(b, int)) else b for b in bounds))
            return Unknown("slice bounds not known statically")
        return slice(*bounds)

    def eval_Call(self, node):
        func = self.eval(node.func)
        found = self.call_arguments(node)
        if isinstance(found, Unknown):
            return found
        return calls.call(self, func, *found, node)

    def call_arguments(self, node: cst.Call):
        """``(args, kwargs)`` of a call, spreads expanded; Unknown where a spread is not a
        list or dict known statically."""
        args, kwargs = [], {}
        for arg in node.args:
            value = self.eval(arg.value)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif arg.star == "*":
                if isinstance(value, (list, tuple)):
                    args.extend(value)
                else:
                    return Unknown("call with *args not known statically")
            elif arg.star == "**":
                if isinstance(value, dict) and all(isinstance(k, str) for k in value):
                    kwargs.update(value)
                else:
                    return Unknown("call with **kwargs not known statically")
            else:
                args.append(value)
        return args, kwargs

    def eval_Lambda(self, node):
        return self.make_lambda(node)

    def eval_Await(self, node):
        return Unknown("await is not evaluated")

    def eval_NamedExpr(self, node):
        value = self.eval(node.value)
        self.assign(node.target, value)
        return value


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str))


def _same_scalar(left: Any, right: Any) -> bool:
    return type(left) is type(right) and left == right


def _other_scalar(left: Any, right: Any) -> bool:
    return not _same_scalar(left, right)


def _is_type(value: Any) -> bool:
    """A builtin type (``list``, what ``type(x)`` gives for a plain value), or a tuple of
    them."""
    if isinstance(value, tuple) and value:
        return all(_is_type(v) and not isinstance(v, tuple) for v in value)
    return isinstance(value, Ref) and value.name.startswith("builtins.")


def _type_comparison(left: Any, right: Any, op: cst.CSTNode) -> Any:
    """``type(x) is list``, ``type(x) == dict``, ``type(x) in (list, tuple)``: decided when
    both sides are builtin types (a type memlint does not know stays unknown)."""
    if isinstance(op, (cst.In, cst.NotIn)):
        if not (_is_type(left) and not isinstance(left, tuple) and isinstance(right, tuple)
                and _is_type(right)):
            return Unknown("membership test of a type not known statically")
        return (left in right) != isinstance(op, cst.NotIn)
    if not (_is_type(left) and _is_type(right)) or not isinstance(
            op, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)):
        return Unknown("comparison of types not known statically")
    return (left == right) != isinstance(op, (cst.IsNot, cst.NotEqual))


def _shifted_index(left: Any, right: Any, op: cst.CSTNode) -> Any:
    """``i + 3``, ``3 + i``, ``i - 60`` of a loop's symbolic index (:mod:`.row_loops`)."""
    index, other = (left, right) if isinstance(left, LoopIndex) else (right, left)
    if not isinstance(other, int) or isinstance(other, (bool, LoopIndex)):
        return Unknown("arithmetic on a loop index not known statically")
    if isinstance(op, _aug_base(cst.Add)):
        return LoopIndex(index.offset + other)
    if isinstance(op, _aug_base(cst.Subtract)) and index is left:
        return LoopIndex(index.offset - other)
    return Unknown("arithmetic on a loop index not known statically")


def _array_comparison(left: Any, right: Any, op: cst.CSTNode, count: int) -> Any:
    """A comparison with NumPy data: ``x > 0.5`` is a bool array; ``x is None`` is known
    (an array is never None)."""
    if count != 1:
        return Unknown("chained comparison of arrays not evaluated")
    if isinstance(op, (cst.Is, cst.IsNot)) and (left is None or right is None):
        return isinstance(op, cst.IsNot)
    if not isinstance(op, (cst.Equal, cst.NotEqual, cst.LessThan,
                                         cst.LessThanEqual, cst.GreaterThan,
                                         cst.GreaterThanEqual)):
        return Unknown("comparison of arrays not evaluated")
    return arrays.compare(left, right)


def _aug_base(cls):
    """Match both ``a + b`` and ``a += b`` operator nodes."""
    aug = {cst.Add: cst.AddAssign, cst.Subtract: cst.SubtractAssign,
           cst.Multiply: cst.MultiplyAssign, cst.Divide: cst.DivideAssign,
           cst.FloorDivide: cst.FloorDivideAssign, cst.Modulo: cst.ModuloAssign,
           cst.Power: cst.PowerAssign, cst.MatrixMultiply: cst.MatrixMultiplyAssign}[cls]
    return (cls, aug)


def _is_plain(value: Any) -> bool:
    """A plain Python value (or container of them) that arithmetic can use directly."""
    if isinstance(value, (int, float, str, bool, type(None))):
        return True
    if isinstance(value, (tuple, list, frozenset)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(v) for v in value.values())
    return False


def _is_sequence_op(op, left: Any, right: Any) -> bool:
    """``[Input(...)] + [Dense(u) for u in units]``, ``[block] * 3``: list and tuple
    concatenation or repetition, whatever the items are."""
    if op is operator.add:
        return isinstance(left, list) and isinstance(right, list) or \
            isinstance(left, tuple) and isinstance(right, tuple)
    if op is operator.mul:
        return any(isinstance(seq, (list, tuple)) and isinstance(n, int)
                   and not isinstance(n, bool) for seq, n in ((left, right), (right, left)))
    return False


def has_truth(value: Any) -> bool:
    """Whether ``bool(value)`` is known: plain values, containers (by their length, even
    when what they hold is not known), and layers, models and functions (always true)."""
    if isinstance(value, (list, tuple, dict, str, range)):
        return True
    return _is_plain(value) or _is_truthy_object(value)


def _is_truthy_object(value: Any) -> bool:
    """Layers, models, functions and classes the analysis made: Python finds them true."""
    from memlint.frontends.keras import classes, plain_objects
    return isinstance(value, (LayerRef, OpaqueLayer, SequentialModel, FunctionalModel,
                              ModelLayer, UserFunction, classes.UserClass,
                              classes.ClassObject, classes.ClassLayer,
                              plain_objects.PlainClass, plain_objects.PlainObject))


def _is_known_object(value: Any) -> bool:
    """A value whose identity is known: None, a plain value, or an object the analysis made
    (never an unknown value, which might be None at run time)."""
    return value is None or _is_plain(value) or _is_truthy_object(value) or isinstance(
        value, Tensor)
