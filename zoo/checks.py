"""Eager checks of constructor arguments with Keras-style messages, shared by layers and models."""

import numbers


def invalid(name, expected, value):
    return ValueError(
        f"Received an invalid value for argument `{name}`, expected {expected}. "
        f"Received: {name}={value!r}"
    )


def positive_int(name, value, allow_none=False):
    """Returns ``value`` if it is a positive int (or None when allowed), else raises."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise invalid(name, "a positive integer or None" if allow_none else "a positive integer", value)
    return int(value)


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
