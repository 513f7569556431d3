"""Configuration: the YAML files in ``conf/`` are the only home of defaults, and their types.

Everything here runs before TensorFlow is imported, so a bad command line fails in a
fraction of a second with one line that names the value and what would be right.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


class ConfigError(ValueError):
    """A configuration value is wrong; the message says which value and what is allowed."""


def options(group: str) -> List[str]:
    """The choices of a config group: the stems of ``conf/<group>/*.yaml``."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def attention_config(name: str, overrides: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``conf/attention/<name>.yaml`` merged with ``overrides``; keys other than kwargs removed."""
    path = CONF_DIR / "attention" / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"Unknown attention '{name}'. Available: {', '.join(options('attention'))}")
    base = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    for key in (overrides or {}):
        if key not in base:
            allowed = ", ".join(k for k in base if k not in ("name", "kind")) or "(none)"
            raise ConfigError(f"Unknown option '{key}' for attention '{name}'. Available: {allowed}")
    base.update(overrides or {})
    return base


def alignment_attentions() -> List[str]:
    """Attention types an RNN decoder accepts (``kind: alignment`` in their config)."""
    return [n for n in options("attention")
            if OmegaConf.load(CONF_DIR / "attention" / f"{n}.yaml").get("kind") == "alignment"]


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
        fitting = [m for m in models if OmegaConf.load(CONF_DIR / "model" / f"{m}.yaml").get("task", "seq2seq") == data_task]
        raise ConfigError(f"model={cfg.model.name} is a {model_task} model and data={cfg.data.name} a {data_task} task. "
                          f"Models for data={cfg.data.name}: {', '.join(fitting) or 'none'}")
    tokenizers = ("char", "word", "wordpiece", "sentencepiece")
    if cfg.data.get("tokenizer") is not None and cfg.data.tokenizer not in tokenizers:
        raise ConfigError(f"data.tokenizer={cfg.data.tokenizer} is not valid. Available: {', '.join(tokenizers)}")
    attention = cfg.model.get("attention")
    if attention is not None:
        allowed = alignment_attentions()
        if attention not in allowed:
            raise ConfigError(f"model.attention={attention} does not work with model {cfg.model.name}: "
                              f"it needs an alignment attention. Available: {', '.join(allowed)}")
        options_cfg = cfg.model.get("attention_options")
        attention_config(attention, OmegaConf.to_container(options_cfg) if options_cfg is not None else {})
    positive = {"trainer.epochs": cfg.trainer.epochs, "trainer.batch_size": cfg.trainer.batch_size}
    for key in ("embed_dim", "hidden_size", "num_layers", "num_heads"):
        if key in cfg.model:
            positive[f"model.{key}"] = cfg.model[key]
    if cfg.trainer.get("steps_per_epoch") is not None:
        positive["trainer.steps_per_epoch"] = cfg.trainer.steps_per_epoch
    for key, value in positive.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{key}={value!r} is not valid: expected a positive integer.")
    if cfg.optimizer.name not in ("adam", "adamw", "sgd"):
        raise ConfigError(f"optimizer.name={cfg.optimizer.name} is not valid. Available: adam, adamw, sgd")
    if cfg.optimizer.get("decay", "none") not in ("none", "inverse_sqrt"):
        raise ConfigError(f"optimizer.decay={cfg.optimizer.decay} is not valid. Available: none, inverse_sqrt")
    smoothing = cfg.trainer.get("label_smoothing", 0.0)
    if not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
        raise ConfigError(f"trainer.label_smoothing={smoothing!r} is not valid: expected a number in [0, 1).")
    lr = cfg.optimizer.learning_rate
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or lr <= 0:
        raise ConfigError(f"optimizer.learning_rate={lr!r} is not valid: expected a positive number.")
    decoding = cfg.get("decoding")
    if decoding is not None:
        strategies = ("greedy", "beam", "sample")
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
        if group and (CONF_DIR / group).is_dir():
            return f"Unknown {group} '{choice}'. Available: {', '.join(options(group))}"
        return f"Unknown config '{missing}'."
    if "Could not override '" in first or "Key '" in text and "is not in struct" in text:
        key = first.split("'")[1] if "'" in first else first
        parent = key.rpartition(".")[0]
        if parent.endswith("attention_options"):
            return (f"Attention options are added with a '+': +{key}=... "
                    f"(see conf/attention/<name>.yaml for the options).")
        node = OmegaConf.select(defaults, parent) if defaults is not None and parent else defaults
        known = ", ".join(str(k) for k in node.keys()) if OmegaConf.is_dict(node) else "?"
        return f"Unknown key '{key}'. Keys in {parent or 'the config'}: {known}"
    return " ".join(lines[:2])


def _is_group(override: str) -> bool:
    return (CONF_DIR / override.split("=")[0].lstrip("+~")).is_dir()


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
    overrides = [a for a in argv if not a.startswith("-") and not a.startswith("hydra")]
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
    for i, (ov, values) in enumerate(sweeps):
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


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ start-up chatter off the terminal (users may set their own level)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import logging

    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
