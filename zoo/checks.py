"""Eager checks of constructor arguments with Keras-style messages, shared by layers and models."""

import difflib
import numbers


class InvalidArgument(ValueError):
    """A Keras-style refusal of one argument; ``name``, ``expected`` and ``value`` say which and why,
    so a caller can word it in its own terms (``zoo.training.model.create_model``: ``model.<name>``)."""

    def __init__(self, name, expected, value):
        super().__init__(f"Received an invalid value for argument `{name}`, expected {expected}. "
                         f"Received: {name}={value!r}")
        self.name, self.expected, self.value = name, expected, value


def invalid(name, expected, value):
    return InvalidArgument(name, expected, value)


def positive_int(name, value, allow_none=False):
    """Returns ``value`` if it is a positive int (or None when allowed), else raises."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise invalid(name, "a positive integer or None" if allow_none else "a positive integer", value)
    return int(value)


def rate(name, value):
    """Returns ``float(value)`` if it is a number in [0, 1) (a dropout rate), else raises naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise invalid(name, "a float in [0, 1)", value)
    return float(value)


def positive_float(name, value):
    """Returns ``float(value)`` if it is a finite number > 0, else raises."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < float("inf"):
        raise invalid(name, "a positive number", value)
    return float(value)


def non_negative_float(name, value):
    """Returns ``float(value)`` if it is a finite number >= 0, else raises."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < float("inf"):
        raise invalid(name, "a non-negative number", value)
    return float(value)


def boolean(name, value):
    """Returns ``value`` if it is a bool, else raises."""
    if not isinstance(value, bool):
        raise invalid(name, "a bool (True or False)", value)
    return value


def choice(name, value, choices):
    """Returns ``value`` if it is one of ``choices``, else raises naming them."""
    if not isinstance(value, str) or value not in choices:
        raise invalid(name, "one of " + ", ".join(repr(c) for c in choices), value)
    return value


def optional_int(name, value):
    """Returns ``value`` if it is None or an int, else raises."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise invalid(name, "an integer or None", value)
    return int(value)


# -- declared size rules ------------------------------------------------------------------------
# A component declares the rules between its arguments once, as a literal ``CONSTRAINTS`` tuple in
# its module (``zoo/models/self_attention/transformer.py``); its constructor calls ``enforce`` and the config
# validator, which must not import Keras, reads the same literal with ``zoo.catalog.model_constraints``
# (an AST read of the file) and calls ``constraint_problems``. A task kind declares the ``trainer.*``
# settings it cannot train with the same way (``TRAINER_CONSTRAINTS`` in ``zoo/training/<task>.py``, read
# by ``zoo.catalog.task_trainer_constraints``). A rule is a dict:
#   {"rule": "multiple", "key": a, "of": b, "why": ...}        a % b == 0
#   {"rule": "even_quotient", "key": a, "of": b, "why": ...}   a / b is an even integer
#   {"rule": "even", "key": a, "why": ...}                     a % 2 == 0
#   {"rule": "one_of", "key": a, "values": NAMES}             a in NAMES (a tuple the module also passes
#                                                             to ``choice``, named, not copied)
#   {"rule": "subset_of", "key": a, "values": NAMES}          a non-empty list of items of NAMES
#   {"rule": "at_least", "key": a, "min": n}                  a >= n (add "integer": True for an int)
#   {"rule": "above", "key": a, "min": n}                     a > n
#   {"rule": "at_most", "key": a, "max": n}                   a <= n
#   {"rule": "not_above", "key": a, "of": b}                  a <= b
# with an optional "when": {other key: value, ...} that must all hold for the rule to apply.
RULES = ("multiple", "even_quotient", "even", "one_of", "subset_of", "at_least", "above", "at_most", "not_above")


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _nearest_multiples(value, step):
    lower = value - value % step
    return [v for v in (lower, lower + step) if v > 0]


BOUNDS = ("subset_of", "at_least", "above", "at_most", "not_above")


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bound_problem(rule, value, values):
    """``{"expected", "fix"}`` when ``value`` breaks the bound ``rule``, else None."""
    kind, key, why = rule["rule"], rule["key"], rule.get("why", "")
    because = f": {why}" if why else ""
    if kind == "subset_of":
        allowed = tuple(rule["values"])
        items = list(value) if isinstance(value, (list, tuple)) else None
        if items and all(item in allowed for item in items):
            return None
        return {"expected": f"a non-empty list of {', '.join(repr(a) for a in allowed)}{because}",
                "fix": f"{key}=[{','.join(str(i) for i in (items or []) if i in allowed) or allowed[0]}]"}
    if kind == "not_above":
        other = rule["of"]
        bound = values.get(other)
        if not _is_number(value) or not _is_number(bound) or value <= bound:
            return None  # the type checks report non-numbers
        return {"expected": f"at most {other}={bound!r}{because}", "fix": f"{key}={bound} or {other}={value}"}
    integer = rule.get("integer", False)
    number = "an integer" if integer else "a number"
    limit = rule["max"] if kind == "at_most" else rule["min"]
    expected = {"at_least": f"{number} >= {limit}", "above": f"{number} > {limit}",
                "at_most": f"{number} <= {limit}"}[kind] + because
    if integer and not _is_int(value) or not _is_number(value):
        return {"expected": expected, "fix": f"{key}={limit}"}
    broken = {"at_least": value < limit, "above": value <= limit, "at_most": value > limit}[kind]
    if not broken:
        return None
    fix = limit if kind != "above" else (limit + 1 if integer else limit + 0.1)
    return {"expected": expected, "fix": f"{key}={fix}"}


def constraint_problems(constraints, values):
    """The rules of ``constraints`` that ``values`` (argument name -> value) break.

    Returns a list of dicts ``{"key", "value", "expected", "fix"}``: ``expected`` says what the
    rule asks (``"a multiple of num_heads=3 (...)"``), ``fix`` the nearest values that pass.
    Rules whose arguments are missing or not integers are skipped (the type checks report those).
    """
    problems = []
    for rule in constraints:
        kind, key, why = rule["rule"], rule["key"], rule.get("why", "")
        if any(p["key"] == key for p in problems):
            continue  # one problem per argument: the first rule it breaks
        if kind not in RULES:
            raise ValueError(f"Unknown constraint rule {kind!r}. Available: {', '.join(RULES)}")
        if any(values.get(k, object()) != v for k, v in rule.get("when", {}).items()):
            continue
        value = values.get(key)
        if kind == "one_of":
            allowed = tuple(rule["values"])
            if key in values and value not in allowed:
                names = [str(a) for a in allowed]
                close = ([n for n in names if n.startswith(str(value))] or difflib.get_close_matches(str(value), names, n=1)
                         or names)
                problems.append({"key": key, "value": value,
                                 "expected": "one of " + ", ".join(repr(a) for a in allowed) + (f": {why}" if why else ""),
                                 "fix": f"{key}={close[0]}"})
            continue
        if kind in BOUNDS:
            if key in values:
                problem = _bound_problem(rule, value, values)
                if problem:
                    problems.append({"key": key, "value": value, **problem})
            continue
        other = rule.get("of")
        divisor = values.get(other) if other else 2
        if not _is_int(value) or not _is_int(divisor) or value <= 0 or divisor <= 0:
            continue
        step = {"multiple": divisor, "even_quotient": 2 * divisor, "even": 2}[kind]
        if value % step == 0:
            continue
        condition = ", ".join(f"{k}={v!r}" for k, v in rule.get("when", {}).items())
        expected = {"multiple": f"a multiple of {other}={divisor}",
                    "even_quotient": f"a multiple of 2 * {other} = {step} (an even {key} / {other})",
                    "even": "an even integer"}[kind]
        if condition:
            expected += f" with {condition}"
        if why:
            expected += f": {why}"
        fixes = [f"{key}={v}" for v in _nearest_multiples(value, step)]
        if other:  # or keep the value and change the divisor: the nearest one that divides it
            factor = step // divisor
            fitting = [d for d in range(1, value + 1) if value % (d * factor) == 0]
            if fitting:
                fixes.append(f"{other}={min(fitting, key=lambda d: (abs(d - divisor), d))}")
        problems.append({"key": key, "value": value, "expected": expected, "fix": " or ".join(fixes)})
    return problems


def enforce(constraints, **values):
    """Raises a Keras-style ``ValueError`` for the first rule of ``constraints`` that ``values`` break."""
    for problem in constraint_problems(constraints, values):
        raise invalid(problem["key"], f"{problem['expected']} (e.g. {problem['fix']})", problem["value"])


def enforce_config(constraints, prefix, **values):
    """Raises ``ConfigError`` with ``problem_lines`` (one per broken rule) if there are any."""
    from zoo.errors import ConfigError

    lines = problem_lines(constraints, values, prefix)
    if lines:
        raise ConfigError("\n".join(lines))


def problem_lines(constraints, values, prefix, defaults=None):
    """One line per rule of ``constraints`` that ``values`` break, the keys as the config spells
    them (``data.train_size=-5 is not valid: expected an integer >= 1; e.g. data.train_size=1
    (default: 20000).``). The validator prints these before TensorFlow starts; a component's
    builder raises them (``ConfigError``) for the same values."""
    lines = []
    for problem in constraint_problems(constraints, values):
        key = problem["key"]
        default = f" (default: {defaults[key]!r})." if defaults and key in defaults else "."
        lines.append(f"{prefix}.{key}={problem['value']!r} is not valid: expected {problem['expected']}; "
                     f"e.g. {prefix}.{problem['fix'].replace(' or ', f' or {prefix}.')}{default}")
    return lines
