"""Configuration: the YAML files in ``conf/`` are the only home of defaults, and their types.

Everything here runs before TensorFlow is imported, so a bad command line fails in a
fraction of a second with one line that names the value and what would be right.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from zoo import catalog
from zoo.catalog import CONF_DIR, options  # noqa: F401  (re-exported)
from zoo.errors import ConfigError  # noqa: F401  (re-exported: the entry points catch it from here)

ATTENTION_GROUP = "attention@model.attention_options"
# (model, old argument) -> new argument: one meaning per name across models (docs/design.md).
RENAMED = {("transformer", "hidden_size"): "intermediate_dim"}


def hydra_overrides(argv: Sequence[str]) -> List[str]:
    """The command line as Hydra composes it.

    ``model.attention=concat`` (the contract spelling) selects the attention config group that the
    RNN models' configs place at ``model.attention_options`` (``attention@model.attention_options=concat``),
    so Hydra composes the layer's full hyperparameters from ``conf/attention/concat.yaml``; sweeps
    (``model.attention=dot,general``) stay sweeps. The options are then part of the config, so
    ``+model.attention_options.<key>=...`` (the spelling before) sets them like any other key.
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") == "model.attention":
            out.append(f"{ATTENTION_GROUP}={value}")
        elif sep and key.startswith("+model.attention_options."):
            out.append(arg[1:])
        else:
            out.append(arg)
    return out


def compose_train(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """The config ``python train.py <overrides>`` runs with (Hydra's Compose API), for tools and tests."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name=config_name, overrides=hydra_overrides(list(overrides)))
    finally:
        GlobalHydra.instance().clear()


def model_kwargs(model_cfg: Any) -> Dict[str, Any]:
    """Keyword arguments for ``zoo.models.create`` from ``cfg.model``: ``name``/``task`` dropped, and
    the attention config's ``name``/``kind`` (which say what the options are for) left out of
    ``attention_options``."""
    kwargs = OmegaConf.to_container(model_cfg, resolve=True) if OmegaConf.is_config(model_cfg) else dict(model_cfg)
    kwargs.pop("name", None)
    kwargs.pop("task", None)
    if isinstance(kwargs.get("attention_options"), dict):
        kwargs["attention_options"] = {k: v for k, v in kwargs["attention_options"].items() if k not in ("name", "kind")}
    return kwargs


def alignment_attentions() -> List[str]:
    """Attention types an RNN decoder accepts (``kind: alignment`` in their config)."""
    return catalog.attentions("alignment")


def flatten(cfg: Any, prefix: str = "") -> Dict[str, Any]:
    """``{"model.hidden_size": 128, ...}`` from a nested config."""
    container = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    out: Dict[str, Any] = {}
    for key, value in container.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, (list, tuple)) or OmegaConf.is_list(value):
        return "a list"
    if isinstance(value, dict) or OmegaConf.is_dict(value):
        return "a mapping"
    return "a string"


def _compatible(default: Any, value: Any) -> bool:
    if default is None or value is None or isinstance(default, str):
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if OmegaConf.is_list(default) or isinstance(default, list):
        return OmegaConf.is_list(value) or isinstance(value, list)
    if OmegaConf.is_dict(default) or isinstance(default, dict):
        return OmegaConf.is_dict(value) or isinstance(value, dict)
    return True


def check_types(cfg: DictConfig, defaults: DictConfig, keys: Sequence[str]) -> None:
    """Raises ConfigError when an overridden key holds a value of another type than its default."""
    for key in keys:
        default = OmegaConf.select(defaults, key, default=None, throw_on_missing=False)
        value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if not _compatible(default, value):
            raise ConfigError(f"{key}={value!r} is not valid: expected {_type_name(default)} "
                              f"(default: {default!r}).")


def validate_train(cfg: DictConfig) -> None:
    """Semantic checks of a composed training config, before any TensorFlow import."""
    models = options("model")
    if cfg.model.name not in models:
        raise ConfigError(f"Unknown model '{cfg.model.name}'. Available: {', '.join(models)}")
    model_task, data_task = cfg.model.get("task", "seq2seq"), cfg.data.get("task", "seq2seq")
    if model_task != data_task:
        fitting = catalog.models(data_task)
        raise ConfigError(f"model={cfg.model.name} is a {model_task} model and data={cfg.data.name} a {data_task} task. "
                          f"Models for data={cfg.data.name}: {', '.join(fitting) or 'none'}")
    tokenizers = catalog.tokenizers()
    if cfg.data.get("tokenizer") is not None and cfg.data.tokenizer not in tokenizers:
        raise ConfigError(f"data.tokenizer={cfg.data.tokenizer} is not valid. Available: {', '.join(tokenizers)}")
    attention = cfg.model.get("attention")
    if attention is not None:
        allowed = alignment_attentions()
        if attention not in allowed:
            raise ConfigError(f"model.attention={attention} does not work with model {cfg.model.name}: "
                              f"it needs an alignment attention. Available: {', '.join(allowed)}")
    positive = {"trainer.epochs": cfg.trainer.epochs, "trainer.batch_size": cfg.trainer.batch_size}
    for key in ("embed_dim", "hidden_size", "intermediate_dim", "num_layers", "num_heads"):
        if key in cfg.model:
            positive[f"model.{key}"] = cfg.model[key]
    if cfg.trainer.get("steps_per_epoch") is not None:
        positive["trainer.steps_per_epoch"] = cfg.trainer.steps_per_epoch
    for key, value in positive.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{key}={value!r} is not valid: expected a positive integer.")
    if cfg.optimizer.name not in catalog.OPTIMIZERS:
        raise ConfigError(f"optimizer.name={cfg.optimizer.name} is not valid. Available: {', '.join(catalog.OPTIMIZERS)}")
    if cfg.optimizer.get("decay", "none") not in catalog.LR_DECAYS:
        raise ConfigError(f"optimizer.decay={cfg.optimizer.decay} is not valid. Available: {', '.join(catalog.LR_DECAYS)}")
    smoothing = cfg.trainer.get("label_smoothing", 0.0)
    if not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
        raise ConfigError(f"trainer.label_smoothing={smoothing!r} is not valid: expected a number in [0, 1).")
    lr = cfg.optimizer.learning_rate
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or lr <= 0:
        raise ConfigError(f"optimizer.learning_rate={lr!r} is not valid: expected a positive number.")
    decoding = cfg.get("decoding")
    if decoding is not None:
        strategies = catalog.DECODING_STRATEGIES
        if decoding.strategy not in strategies:
            raise ConfigError(f"decoding.strategy={decoding.strategy} is not valid. Available: {', '.join(strategies)}")
        checks = [("beam_size", decoding.beam_size, lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
                  ("alpha", decoding.alpha, lambda v: v >= 0, "a number >= 0"),
                  ("beta", decoding.beta, lambda v: v >= 0, "a number >= 0"),
                  ("temperature", decoding.temperature, lambda v: v > 0, "a number > 0"),
                  ("top_k", decoding.top_k, lambda v: isinstance(v, int) and v >= 0, "an integer >= 0 (0 = all)"),
                  ("top_p", decoding.top_p, lambda v: 0 < v <= 1, "a number in (0, 1]")]
        for key, value, ok, expected in checks:
            if not ok(value):
                raise ConfigError(f"decoding.{key}={value!r} is not valid: expected {expected}.")
        if decoding.max_length is not None and (not isinstance(decoding.max_length, int) or decoding.max_length < 1):
            raise ConfigError(f"decoding.max_length={decoding.max_length!r} is not valid: expected a positive integer or null.")
    dropout = cfg.model.get("dropout", 0.0)
    if not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ConfigError(f"model.dropout={dropout!r} is not valid: expected a number in [0, 1).")


def _hydra_message(error: Exception, defaults: Optional[DictConfig] = None) -> str:
    """One line from a Hydra/OmegaConf composition error."""
    text = str(error).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(error).__name__
    if "Could not find '" in first:
        # In 'train': Could not find 'model/nope'  + "Available options in 'model':" + list
        missing = first.split("Could not find '")[1].split("'")[0]
        group, _, choice = missing.rpartition("/")
        if group == "attention":
            return (f"model.attention={choice} is not an attention. Available: "
                    f"{', '.join(catalog.attentions('alignment'))} (conf/attention/)")
        if group and (CONF_DIR / group).is_dir():
            return f"Unknown {group} '{choice}'. Available: {', '.join(options(group))}"
        return f"Unknown config '{missing}'."
    if "Could not override '" in first or "Key '" in text and "is not in struct" in text:
        key = first.split("'")[1] if "'" in first else first
        parent = key.rpartition(".")[0]
        if key.startswith(ATTENTION_GROUP) or "No match in the defaults list" in text and "attention@" in text:
            with_attention = [m for m in options("model") if catalog.model_has_attention(m)]
            return (f"model.attention: this model has no attention to choose. "
                    f"Models with model.attention: {', '.join(with_attention)}")
        if parent.endswith("attention_options"):
            node = OmegaConf.select(defaults, parent) if defaults is not None else None
            name = node.get("name", "?") if OmegaConf.is_dict(node) else "?"
            allowed = ", ".join(str(k) for k in node.keys() if k not in ("name", "kind")) if OmegaConf.is_dict(node) else "?"
            return (f"Unknown option '{key.rpartition('.')[2]}' for attention '{name}'. Available: {allowed or '(none)'} "
                    f"(conf/attention/{name}.yaml)")
        node = OmegaConf.select(defaults, parent) if defaults is not None and parent else defaults
        known = ", ".join(str(k) for k in node.keys()) if OmegaConf.is_dict(node) else "?"
        model = OmegaConf.select(defaults, "model.name") if defaults is not None else None
        if parent == "model" and (model, key.rpartition(".")[2]) in RENAMED:
            new = RENAMED[(model, key.rpartition(".")[2])]
            return f"{key} was renamed for model {model}: use model.{new} (docs/design.md, model arguments)."
        return f"Unknown key '{key}'. Keys in {parent or 'the config'}: {known}"
    return " ".join(lines[:2])


def _is_group(override: str) -> bool:
    return (CONF_DIR / override.split("=")[0].lstrip("+~").split("@")[0]).is_dir()


def precheck(argv: Sequence[str], config_name: str = "train") -> Optional[str]:
    """Composes the config for the command line ``argv`` and returns an error line, or None.

    Checks: group choices exist (``model=nope``), keys exist, values have the type of their
    default (``trainer.epochs=abc``), and ``validate_train`` passes. Sweeps (``-m a=x,y``)
    are checked one value at a time. Hydra's own flags are left to Hydra.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return None  # --help, --cfg, ...: Hydra's business
    overrides = hydra_overrides([a for a in argv if not a.startswith("-") and not a.startswith("hydra")])
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as error:  # noqa: BLE001 - Hydra's parse errors
        return f"Could not parse the command line: {str(error).splitlines()[0]}"

    # One composition per value of each sweep; the others at their first value.
    base = []
    sweeps = []
    for ov in parsed:
        if ov.is_sweep_override():
            values = [str(v) for v in ov.sweep_string_iterator()]
            sweeps.append((ov, values))
            base.append(f"{ov.get_key_element()}={values[0]}")
        else:
            base.append(ov.input_line)
    candidates = [base]
    for ov, values in sweeps:
        index = base.index(f"{ov.get_key_element()}={values[0]}")
        for value in values[1:]:
            variant = list(base)
            variant[index] = f"{ov.get_key_element()}={value}"
            candidates.append(variant)

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for candidate in candidates:
                group_only = [o for o in candidate if _is_group(o)]
                try:
                    defaults = compose(config_name=config_name, overrides=group_only)
                    cfg = compose(config_name=config_name, overrides=candidate)
                except Exception as error:  # noqa: BLE001 - composition errors become one line
                    return _hydra_message(error, locals().get("defaults"))
                keys = [o.split("=")[0].lstrip("+~") for o in candidate if not _is_group(o)]
                try:
                    check_types(cfg, defaults, keys)
                    if config_name == "train":
                        validate_train(cfg)
                except ConfigError as error:
                    return str(error)
    finally:
        GlobalHydra.instance().clear()
    return None


def exit_on_bad_command_line(config_name: str) -> None:
    """For entry points: print one line and exit 2 if the command line is wrong."""
    error = precheck(sys.argv[1:], config_name)
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = hydra_overrides(sys.argv[1:])


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ start-up chatter off the terminal (users may set their own level)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import logging

    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
