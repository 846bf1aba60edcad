"""The lifecycle's refusal of a transition it does not allow (``lifecycle.TransitionError``),
in a module of its own that stays Python: mypyc compiles no subclass of ``RuntimeError``, and
``lifecycle`` is compiled (``tools/compiled.py``)."""

from __future__ import annotations


class TransitionError(RuntimeError):
    """A transition ``lifecycle.TRANSITIONS`` does not allow, or one made without what it
    declares (the ownership confirmed): a bug."""
