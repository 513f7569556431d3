"""Environment variables put back as they were after a block (MLflow reads its settings from them,
and writes some of them itself)."""

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def restored(*names: str) -> Iterator[None]:
    """Whatever the block sets or removes, the variables ``names`` end as they were before it."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
