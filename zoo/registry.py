"""A name -> builder registry, one per kind of component (models, attention layers, data)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List


class Registry:
    """Maps names to builders; names are the stems of the matching config files.

    Example:
        >>> MODELS = Registry("model")
        >>> @MODELS.register("tiny")
        ... def tiny(**kwargs): return kwargs
        >>> MODELS.names()
        ['tiny']
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._builders: Dict[str, Callable[..., Any]] = {}
        self._meta: Dict[str, Dict[str, Any]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorator(builder: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._builders:
                raise ValueError(f"Duplicate {self.kind} name '{name}': it is already registered "
                                 f"by {self._builders[name].__module__}.")
            self._builders[name] = builder
            self._meta[name] = dict(meta)
            return builder

        return decorator

    def unregister(self, name: str) -> None:
        """Removes ``name`` (a test's throwaway entry); an unknown name raises as ``get`` does."""
        self.get(name)
        del self._builders[name], self._meta[name]

    def names(self) -> List[str]:
        return sorted(self._builders)

    def get(self, name: str) -> Callable[..., Any]:
        if name not in self._builders:
            raise ValueError(f"Unknown {self.kind} '{name}'. Available: {', '.join(self.names())}")
        return self._builders[name]

    def meta(self, name: str) -> Dict[str, Any]:
        self.get(name)
        return dict(self._meta[name])

    def create(self, name: str, /, **kwargs: Any) -> Any:
        return self.get(name)(**kwargs)

    def __contains__(self, name: str) -> bool:
        return name in self._builders
