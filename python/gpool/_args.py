"""Argument checks for every binding: values are validated here, before ctypes sees them
(ctypes wraps an out-of-range int silently and raises its own ArgumentError for a wrong type).

A value of the wrong type raises ArgumentTypeError (a gpool.Error and a TypeError), one out of
range ArgumentValueError (a gpool.Error and a ValueError); both carry GPOOL_ERR_INVALID_ARG
and name the argument and the call."""

import ctypes
import operator

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
INT_MAX = (1 << 31) - 1


def _errors():
    from . import ArgumentTypeError, ArgumentValueError

    return ArgumentTypeError, ArgumentValueError


def _type_error(call, what, value, expected):
    raise _errors()[0]("%s must be %s, not %s %r" % (what, expected, type(value).__name__,
                                                     value), call)


def _value_error(call, what, value, bounds):
    raise _errors()[1]("%s %r out of range (%s)" % (what, value, bounds), call)


def integer(value, what, call, lo=0, hi=U64_MAX):
    """``value`` as an int in lo..hi: ints and objects with __index__ (not bool)."""
    if isinstance(value, bool):
        _type_error(call, what, value, "an int")
    try:
        n = operator.index(value)
    except TypeError:
        _type_error(call, what, value, "an int")
    if n < lo or n > hi:
        _value_error(call, what, n, "%d..%d" % (lo, hi) if hi != U64_MAX else
                     "%d..2**64-1" % lo)
    return n


def size(value, call, what="size"):
    """A size_t: an int in 0..2**64-1."""
    return integer(value, what, call)


def address(value, call, what="ptr", none_ok=True):
    """A device or host address: None (when none_ok), an int in 0..2**64-1 or a
    ctypes.c_void_p; returned as an int or None."""
    if value is None:
        if none_ok:
            return None
        _type_error(call, what, value, "an address (an int)")
    if isinstance(value, ctypes.c_void_p):
        return value.value
    return integer(value, what, call) or None


def stream(value, call, what="stream"):
    """A stream: None (the pool's default stream), an int CUstream handle, a ctypes.c_void_p,
    or an object with a ``cuda_stream`` (PyTorch), ``ptr`` (CuPy) or ``handle`` attribute
    holding one; returned as an int or None (0 is the legacy stream, as None is)."""
    if value is None:
        return None
    if isinstance(value, ctypes.c_void_p):
        return value.value
    if not isinstance(value, int) and not hasattr(value, "__index__"):
        for attr in ("cuda_stream", "ptr", "handle"):
            if hasattr(value, attr):
                inner = getattr(value, attr)
                if isinstance(inner, ctypes.c_void_p):
                    return inner.value
                return integer(inner, "%s.%s" % (what, attr), call) or None
        _type_error(call, what, value,
                    "None, an int handle or an object with cuda_stream, ptr or handle")
    return integer(value, what, call) or None


def enum(value, table, what, call):
    """A gpool enum: a name of ``table`` (any case) or one of its int values."""
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise _errors()[1]("unknown %s %r (one of %s)" % (what, value, ", ".join(table)),
                               call) from None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        _type_error(call, what, value, "a name (%s) or its int value" % ", ".join(table))
    n = operator.index(value)
    if n not in table.values():
        _value_error(call, what, n, "one of %s" % ", ".join(
            "%d (%s)" % (v, k) for k, v in table.items()))
    return n


def flags(value, table, call):
    """GPOOL_ALLOC_* flags: an int in 0..2**32-1 or an iterable of names of ``table``."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, bool) or hasattr(value, "__index__"):
        return integer(value, "flags", call, hi=U32_MAX)
    try:
        items = list(value)
    except TypeError:
        _type_error(call, "flags", value, "an int or an iterable of %s" % ", ".join(table))
    n = 0
    for item in items:
        n |= enum(item, table, "flag", call)
    return n


def device(value, call):
    """A CUDA device ordinal: an int in 0..2**31-1."""
    return integer(value, "device", call, hi=INT_MAX)
