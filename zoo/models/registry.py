"""The model registry: ``@register_model("<name>")`` on a model class, ``MODELS.create(name, ...)``.

Every model, whatever its family, registers here; ``conf/model/<name>.yaml`` names the same model for
the config (``zoo.catalog.models()``, checked equal to this registry by the tests).
"""

from zoo.registry import Registry

MODELS = Registry("model")
register_model = MODELS.register
