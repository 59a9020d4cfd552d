"""A bounded abstract interpreter over the subset of Python that model scripts use.

It walks a libcst module statement by statement: imports (resolved to canonical names),
assignments, arithmetic, ``for`` loops over ``range`` and literal sequences, ``if`` on known
values, ``with`` and ``try`` bodies, calls of functions defined in the file (inlined, with
their own local scope), and library calls.  It never imports or executes the analysed code.
Library calls (Keras, NumPy, builtins) are handled in :mod:`.calls`.

Work is bounded: a step budget per file, an iteration cap per loop and a depth cap on nested
calls stop pathological input (``for i in range(10**12)``, unbounded recursion) quickly, with
an info diagnostic saying so.
"""

from __future__ import annotations

import operator
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from memlint.frontends.keras import calls, models
from memlint.frontends.keras.names import canonical
from memlint.frontends.keras.state import MAX_SEQUENCE, FileState
from memlint.frontends.keras.values import Ref, Tensor, Unknown, UserFunction, is_unknown
from memlint.ir import Location

MAX_STEPS = 200_000  # expression/statement evaluations per file
MAX_LOOP_ITERATIONS = 10_000  # iterations of one loop
MAX_INT_BITS = 256  # larger integer results are treated as unknown
MAX_CALL_DEPTH = 16  # nested calls of functions defined in the analysed file


class BudgetExceeded(Exception):
    """The per-file step budget ran out."""


class _LoopControl(Exception):
    def __init__(self, kind: str):
        self.kind = kind


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


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
_COMPARE = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
    cst.Is: operator.is_, cst.IsNot: operator.is_not,
}


class Interpreter:
    """Evaluates one module; results accumulate in :class:`FileState`."""

    def __init__(self, module: cst.Module, state: FileState):
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.positions = self.wrapper.resolve(PositionProvider)
        self.state = state
        self.globals: dict[str, Any] = {"__name__": "__main__"}
        self.scope: dict[str, Any] = self.globals  # the current local scope
        self.outer: tuple = ()  # enclosing function scopes, innermost first
        self.global_names: set = set()  # names declared ``global`` in the current function
        self.depth = 0  # nesting of inlined calls
        self.steps = 0

    # ------------------------------------------------------------------ helpers

    def location(self, node: cst.CSTNode) -> Location:
        pos = self.positions.get(node)
        if pos is None:
            return Location(self.state.path, 1, 1)
        return Location(self.state.path, pos.start.line, pos.start.column + 1,
                        pos.end.line, pos.end.column + 1)

    def tick(self, node: cst.CSTNode) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise BudgetExceeded(self.location(node))

    def run(self) -> None:
        """Evaluate the whole module, stopping cleanly when the budget runs out."""
        try:
            for stmt in self.wrapper.module.body:
                try:
                    self.exec_statement(stmt)
                except (BudgetExceeded, _Return, _LoopControl, RecursionError, MemoryError):
                    raise
                except Exception as exc:  # a bug in memlint: keep what the rest gives
                    self.state.note_internal(self.location(stmt), "this statement", exc)
        except BudgetExceeded as exc:
            loc = exc.args[0]
            self.state.note_budget(loc, f"analysis stopped after {MAX_STEPS:,} steps; "
                                        "models found before this point are still reported")
        except (_Return, _LoopControl):
            # 'return' / 'break' outside a function or loop: Python rejects the file
            self.state.syntax_error(Location(self.state.path, 1, 1),
                                    "'return', 'break' or 'continue' outside a function or "
                                    "loop; analysis stopped there")

    # ------------------------------------------------------------------ statements

    def exec_block(self, body) -> None:
        for stmt in body:
            self.exec_statement(stmt)

    def exec_statement(self, stmt: cst.CSTNode) -> None:
        self.tick(stmt)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.exec_small(small)
        elif isinstance(stmt, cst.For):
            self.exec_for(stmt)
        elif isinstance(stmt, cst.If):
            self.exec_if(stmt)
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                value = self.eval(item.item)
                if item.asname is not None:
                    self.assign(item.asname.name, value)
            self.exec_block(stmt.body.body)
        elif isinstance(stmt, cst.Try):
            self.exec_block(stmt.body.body)
            if stmt.orelse is not None:
                self.exec_block(stmt.orelse.body.body)
            if stmt.finalbody is not None:
                self.exec_block(stmt.finalbody.body.body)
        elif isinstance(stmt, cst.While):
            self.state.note_unresolved(self.location(stmt), "while loop",
                                       "while loops are not evaluated; its body is skipped")
        elif isinstance(stmt, cst.FunctionDef):
            self.define_function(stmt)
        elif isinstance(stmt, cst.ClassDef):
            name = stmt.name.value
            value = Unknown(f"class '{name}' defined in the analysed file is not evaluated")
            value.class_name = name
            self.set_name(name, value)
            self.state.definitions.append(("class", name, self.location(stmt)))

    def exec_small(self, small: cst.CSTNode) -> None:
        if isinstance(small, cst.Expr):
            self.eval(small.value)
        elif isinstance(small, cst.Assign):
            value = self.eval(small.value)
            for target in small.targets:
                self.assign(target.target, value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.eval(small.value))
        elif isinstance(small, cst.AugAssign):
            current = self.eval(small.target)
            value = self.binary(current, self.eval(small.value), small.operator, small)
            self.assign(small.target, value)
        elif isinstance(small, cst.Import):
            for alias in small.names:
                full = _dotted(alias.name)
                if alias.asname is not None:
                    self.set_name(alias.asname.name.value, Ref(canonical(full)))
                else:
                    top = full.split(".")[0]
                    self.set_name(top, Ref(canonical(top)))
        elif isinstance(small, cst.ImportFrom):
            self.exec_import_from(small)
        elif isinstance(small, (cst.Break, cst.Continue)):
            raise _LoopControl("break" if isinstance(small, cst.Break) else "continue")
        elif isinstance(small, cst.Return):
            raise _Return(self.eval(small.value) if small.value is not None else None)
        elif isinstance(small, cst.Global):
            self.global_names.update(n.name.value for n in small.names)
        elif isinstance(small, cst.Del):
            self.delete(small.target)

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return  # project-local imports are followed in a later version
        module = _dotted(node.module)
        if isinstance(node.names, cst.ImportStar):
            self.state.star_imports.append(canonical(module))
            return
        for alias in node.names:
            name = _dotted(alias.name)
            bound = alias.asname.name.value if alias.asname is not None else name
            self.set_name(bound, Ref(canonical(f"{module}.{name}")))

    def exec_for(self, stmt: cst.For) -> None:
        iterable = self.eval(stmt.iter)
        items = self.iterate(iterable, stmt)
        if items is None:
            self.state.note_unresolved(self.location(stmt.iter), "for loop",
                                       "the loop's iterable is not known statically; "
                                       "its body is skipped")
            return
        count = 0
        broke = False
        for item in items:
            count += 1
            if count > MAX_LOOP_ITERATIONS:
                self.state.note_budget(self.location(stmt),
                                       f"loop stopped after {MAX_LOOP_ITERATIONS:,} iterations")
                return
            self.assign(stmt.target, item)
            try:
                self.exec_block(stmt.body.body)
            except _LoopControl as ctl:
                if ctl.kind == "break":
                    broke = True
                    break
        if not broke and stmt.orelse is not None:
            self.exec_block(stmt.orelse.body.body)

    def iterate(self, value: Any, node: cst.CSTNode):
        if isinstance(value, range):
            return value  # lazy: range(10**12) is never materialised
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, dict):
            return list(value)
        return None

    def exec_if(self, stmt: cst.If) -> None:
        test = self.eval(stmt.test)
        if not _has_truth(test):
            self.state.note_unresolved(
                self.location(stmt.test), "if condition",
                "the condition is not known statically; the first branch was followed")
            self.exec_block(stmt.body.body)
            return
        if test:
            self.exec_block(stmt.body.body)
        elif isinstance(stmt.orelse, cst.If):
            self.exec_if(stmt.orelse)
        elif stmt.orelse is not None:
            self.exec_block(stmt.orelse.body.body)

    # ------------------------------------------------------------------ functions

    def define_function(self, stmt: cst.FunctionDef) -> None:
        """``def f(...)``: remember it (defaults evaluated now, as Python does) for inlining."""
        name = stmt.name.value
        defaults = {}
        params = stmt.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                defaults[param.name.value] = self.eval(param.default)
        closure = (self.scope,) + self.outer if self.scope is not self.globals else ()
        self.set_name(name, UserFunction(name, stmt, defaults, closure, self.location(stmt)))
        self.state.definitions.append(("function", name, self.location(stmt)))

    def call_function(self, fn: UserFunction, args: list, kwargs: dict, node) -> Any:
        """Inline a call of a function defined in the analysed file."""
        loc = self.location(node)
        if self.depth >= MAX_CALL_DEPTH:
            self.state.note_budget(loc, f"call of '{fn.name}' not evaluated: more than "
                                        f"{MAX_CALL_DEPTH} nested calls")
            return Unknown(f"result of '{fn.name}' (calls nested too deeply)")
        local = self.bind_arguments(fn, args, kwargs)
        if local is None:
            self.state.note_unresolved(loc, f"call of '{fn.name}'",
                                       "its arguments do not match the definition")
            return Unknown(f"result of '{fn.name}' (arguments do not match)")
        self.state.definitions[:] = [d for d in self.state.definitions
                                     if not (d[0] == "function" and d[1] == fn.name)]
        saved = (self.scope, self.outer, self.global_names)
        self.scope, self.outer, self.global_names = local, fn.closure, set()
        self.depth += 1
        try:
            body = fn.node.body
            if isinstance(body, cst.SimpleStatementSuite):
                for small in body.body:
                    self.exec_small(small)
            else:
                self.exec_block(body.body)
            result = None
        except _Return as ret:
            result = ret.value
        except _LoopControl:
            result = Unknown(f"result of '{fn.name}'")
        finally:
            self.scope, self.outer, self.global_names = saved
            self.depth -= 1
        return result

    def bind_arguments(self, fn: UserFunction, args: list, kwargs: dict):
        """The local scope of a call: parameters bound as Python binds them (None if invalid)."""
        params = fn.node.params
        local: dict = {}
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        args = list(args)
        kwargs = dict(kwargs)
        for name in positional:
            if args:
                local[name] = args.pop(0)
            elif name in kwargs:
                local[name] = kwargs.pop(name)
            elif name in fn.defaults:
                local[name] = fn.defaults[name]
            else:
                return None
        star = params.star_arg
        if isinstance(star, cst.Param):
            local[star.name.value] = tuple(args)
        elif args:
            return None
        for param in params.kwonly_params:
            name = param.name.value
            if name in kwargs:
                local[name] = kwargs.pop(name)
            elif name in fn.defaults:
                local[name] = fn.defaults[name]
            else:
                return None
        if params.star_kwarg is not None:
            local[params.star_kwarg.name.value] = kwargs
        elif kwargs:
            return None
        return local

    def set_name(self, name: str, value: Any) -> None:
        if name in self.global_names:
            self.globals[name] = value
        else:
            self.scope[name] = value

    def delete(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            scope = self.globals if target.value in self.global_names else self.scope
            scope.pop(target.value, None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.delete(el.value)

    def assign(self, target: cst.CSTNode, value: Any) -> None:
        if isinstance(target, cst.Name):
            self.set_name(target.value, value)
            module_level = self.scope is self.globals or target.value in self.global_names
            self.state.bind_variable(target.value, value, module_level)
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [el.value for el in target.elements]
            if isinstance(value, (tuple, list)) and len(value) == len(names):
                for sub, item in zip(names, value):
                    self.assign(sub, item)
            else:
                for sub in names:
                    self.assign(sub, Unknown("unpacking of a value that is not known statically"))
        elif isinstance(target, cst.Subscript):
            container = self.eval(target.value)
            if isinstance(container, (list, dict)) and len(target.slice) == 1:
                index = target.slice[0].slice
                if isinstance(index, cst.Index):
                    key = self.eval(index.value)
                    try:
                        container[key] = value
                    except (TypeError, IndexError, KeyError):
                        pass
        elif isinstance(target, cst.Attribute):
            calls.set_attribute(self.eval(target.value), target.attr.value, value)

    # ------------------------------------------------------------------ expressions

    def eval(self, node: cst.CSTNode) -> Any:
        self.tick(node)
        method = getattr(self, f"eval_{type(node).__name__}", None)
        if method is None:
            return Unknown(f"{type(node).__name__} expressions are not evaluated")
        return method(node)

    def eval_Integer(self, node):
        return node.evaluated_value

    def eval_Float(self, node):
        return node.evaluated_value

    def eval_Imaginary(self, node):
        return Unknown("complex numbers are not evaluated")

    def eval_SimpleString(self, node):
        try:
            value = node.evaluated_value
        except Exception:  # malformed escapes
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
                if is_unknown(value) or part.format_spec or part.conversion:
                    return Unknown("f-string with parts not known statically")
                out.append(str(value))
        return "".join(out)

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
        for module in self.state.star_imports:
            return Ref(canonical(f"{module}.{name}"))
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
                if not _hashable(key):
                    return Unknown("dict with keys not known statically")
                out[key] = self.eval(el.value)
            else:
                value = self.eval(el.value)
                if not isinstance(value, dict):
                    return Unknown("dict unpacking of a value not known statically")
                out.update(value)
        return out

    def eval_Set(self, node):
        return Unknown("sets are not evaluated")

    def eval_ListComp(self, node):
        return self._comprehension(node, list)

    def eval_GeneratorExp(self, node):
        return self._comprehension(node, list)

    def _comprehension(self, node, build):
        # a comprehension has its own scope: its loop variables do not leak
        saved = (self.scope, self.outer, self.global_names)
        self.outer = (self.scope,) + self.outer if self.scope is not self.globals else self.outer
        self.scope, self.global_names = {}, set()
        out = []
        try:
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
            if not all(self.eval(cond.test) is True for cond in for_in.ifs):
                continue
            if for_in.inner_for_in is not None:
                if not self._comp_loop(for_in.inner_for_in, emit):
                    return False
            else:
                emit()
        return True

    def eval_IfExp(self, node):
        test = self.eval(node.test)
        if not _has_truth(test):
            return Unknown("conditional expression on a value not known statically")
        return self.eval(node.body) if test else self.eval(node.orelse)

    def eval_UnaryOperation(self, node):
        value = self.eval(node.expression)
        if isinstance(node.operator, cst.Not):
            return Unknown("not of an unknown value") if not _has_truth(value) else not value
        if isinstance(value, Tensor) and isinstance(node.operator, cst.Minus):
            return models.tensor_operation(self, "Negative", [value], node)
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
        if isinstance(left, Tensor) or isinstance(right, Tensor):
            op_type = next((name for cls, name in _TENSOR_OPS.items()
                            if isinstance(op_node, _aug_base(cls))), None)
            if op_type is not None:
                return models.tensor_operation(self, op_type, [left, right], node)
            return Tensor(None, reason="operator on tensors not modelled")
        op = next((fn for cls, fn in _BINARY.items() if isinstance(op_node, _aug_base(cls))),
                  None)
        if op is None:
            return Unknown("operator not evaluated")
        if not (_is_plain(left) and _is_plain(right)):
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
        if not _has_truth(left):
            return Unknown("boolean operation on a value not known statically")
        if isinstance(node.operator, cst.And):
            return self.eval(node.right) if left else left
        return left if left else self.eval(node.right)

    def eval_Comparison(self, node):
        left = self.eval(node.left)
        for target in node.comparisons:
            right = self.eval(target.comparator)
            if not (_is_plain(left) and _is_plain(right)):
                return Unknown("comparison of values not known statically")
            op = next((fn for cls, fn in _COMPARE.items() if isinstance(target.operator, cls)),
                      None)
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
        if len(node.slice) != 1:
            return Unknown("multi-dimensional subscript")
        sl = node.slice[0].slice
        if isinstance(sl, cst.Index):
            key = self.eval(sl.value)
            return calls.subscript(base, key)
        lower = self.eval(sl.lower) if sl.lower is not None else None
        upper = self.eval(sl.upper) if sl.upper is not None else None
        step = self.eval(sl.step) if sl.step is not None else None
        if any(is_unknown(v) for v in (lower, upper, step)):
            return Unknown("slice bounds not known statically")
        return calls.subscript(base, slice(lower, upper, step))

    def eval_Call(self, node):
        func = self.eval(node.func)
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
        return calls.call(self, func, args, kwargs, node)

    def eval_Lambda(self, node):
        return Unknown("lambda functions are not evaluated")

    def eval_Await(self, node):
        return Unknown("await is not evaluated")

    def eval_NamedExpr(self, node):
        value = self.eval(node.value)
        self.assign(node.target, value)
        return value


def _aug_base(cls):
    """Match both ``a + b`` and ``a += b`` operator nodes."""
    aug = {cst.Add: cst.AddAssign, cst.Subtract: cst.SubtractAssign,
           cst.Multiply: cst.MultiplyAssign, cst.Divide: cst.DivideAssign,
           cst.FloorDivide: cst.FloorDivideAssign, cst.Modulo: cst.ModuloAssign,
           cst.Power: cst.PowerAssign}[cls]
    return (cls, aug)


def _is_plain(value: Any) -> bool:
    """A plain Python value (or container of them) that arithmetic can use directly."""
    if isinstance(value, (int, float, str, bool, type(None))):
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(v) for v in value.values())
    return False


def _has_truth(value: Any) -> bool:
    """Whether ``bool(value)`` is known: plain values, and containers (by their length, even
    when what they hold is not known)."""
    if isinstance(value, (list, tuple, dict, str, range)):
        return True
    return _is_plain(value)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return not is_unknown(value)


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""

