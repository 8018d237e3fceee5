"""One registry idiom for every name -> implementation table (scorers, actuators, curricula, training backends,
graders), so each refuses the same mistakes the same way (issue 37):

* a second, *different* object under a taken name is refused (the same class or function registered again, as
  when its module is imported twice, is not a conflict);
* an unknown name is refused with the close names and the known ones, in the table's own error class (a
  `PolicyConfigError` for a policy table, a `TrainingConfigError` for backends, ...);
* any module may register (a researcher's plugin, imported through a policy's `plugins:` or a backend module),
  since registering is a call on the table, not an edit of a literal.

A `Registry` is a `dict` for reading (`name in table`, `table[name]`, `.items()`), so readers need no new API;
every write goes through `__setitem__`, which applies the duplicate rule."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

V = TypeVar("V")


def _name_of(impl: Any) -> tuple[str, str]:
    return (getattr(impl, "__module__", ""), getattr(impl, "__qualname__", repr(impl)))


class Registry(dict[str, V]):
    """A named table of `kind` entries whose errors are `error` instances (see the module docstring)."""

    def __init__(self, kind: str, error: type[Exception], implementation: Callable[[V], Any] | None = None) -> None:
        """`implementation`: the class or function an entry stands for (default: the entry itself), what makes
        two registrations the same: its module and qualified name."""
        super().__init__()
        self.kind, self.error = kind, error
        self._impl = implementation or (lambda v: v)

    def _identity(self, value: V) -> tuple[str, str]:
        return _name_of(self._impl(value))

    def __setitem__(self, name: str, value: V) -> None:
        if not isinstance(name, str) or not name:
            raise self.error(f"{self.kind}: a registered name must be a non-empty string, got {name!r}")
        old = self.get(name)
        if old is not None and self._identity(old) != self._identity(value):
            mod, qual = self._identity(old)
            raise self.error(f"{self.kind} {name!r} is already registered by {mod}.{qual}; choose another name")
        super().__setitem__(name, value)

    def setdefault(self, name: str, value: V) -> V:
        if name not in self:
            self[name] = value
        return self[name]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def lookup(self, name: Any, where: str = "", also: Iterable[str] = ()) -> V:
        """The entry `name`; unknown -> `error` naming `where` (e.g. the config field), the close names and the
        known ones (`also`: valid names not registered yet, e.g. backends whose module is imported on use)."""
        if isinstance(name, str) and name in self:
            return self[name]
        known = sorted(set(self) | set(also))
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
        hint = f"; did you mean {close}?" if close else ""
        prefix = f"{where}: " if where else ""
        raise self.error(f"{prefix}unknown {self.kind} {name!r}{hint} known: {known}")


__all__ = ["Registry"]
