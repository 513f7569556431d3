"""Configuration: the YAML files in ``conf/`` are the only home of defaults, and their types.

Everything here runs before TensorFlow is imported, so a bad command line fails in a
fraction of a second with one line that names the value and what would be right.
"""

from __future__ import annotations

import copy
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf

from zoo import catalog, checks, kernels, store
from zoo.catalog import CONF_DIR, options  # noqa: F401  (re-exported)
from zoo.errors import ConfigError, CorpusError  # noqa: F401  (ConfigError re-exported: the entry points catch it here)
from zoo.tokens import SPECIALS

ATTENTION_GROUP = "attention@model.attention_options"
# (model, old argument) -> new argument: one meaning per name across models (docs/design.md).
RENAMED = {("transformer", "hidden_size"): "intermediate_dim"}


def hydra_overrides(argv: Sequence[str], config_name: str = "train") -> List[str]:
    """The command line as Hydra composes it.

    ``model.attention=concat`` (the contract spelling) selects the attention config group that the
    RNN models' configs place at ``model.attention_options`` (``attention@model.attention_options=concat``),
    so Hydra composes the layer's full hyperparameters from ``conf/attention/concat.yaml``; sweeps
    (``model.attention=dot,general``) stay sweeps. The options are then part of the config, so
    ``+model.attention_options.<key>=...`` (the spelling before) sets them like any other key.
    For ``evaluate``, ``data=<name>`` becomes ``data={name:<name>}`` (see ``data_name``).
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and config_name == "evaluate" and key == "data" and value not in ("null", ""):
            # evaluate.py's data=<name> is a value, but Hydra takes any key named like a config
            # group (conf/data/) for a group override; a mapping is always a value.
            out.append(f"data={{name:{value}}}")
        elif sep and key.lstrip("+~") == "model.attention":
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
            return compose(config_name=config_name, overrides=hydra_overrides(list(overrides), config_name))
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


def data_name(value: Any) -> str:
    """The dataset an evaluation config names: ``data={name: dates}`` (from ``data=dates``) or ``dates``."""
    return str(value.get("name")) if OmegaConf.is_dict(value) or isinstance(value, dict) else str(value)


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


def redact_uri(value: str) -> str:
    """A URI (or any text) without its secrets: ``http://alice:pw@host`` -> ``http://***@host``,
    ``?token=x`` -> ``?token=***`` (``zoo.store.redact_uri``, which the store's own messages use)."""
    return store.redact_uri(value)


def redacted(cfg: Any) -> DictConfig:
    """A resolved copy of ``cfg`` whose strings hold no credentials (URIs' user:password and secret
    query parameters masked): what is logged as params and ``config.yaml`` and exported. The
    config's only environment interpolation is ``tracking.uri`` (``MLFLOW_TRACKING_URI``)."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return redact_uri(value) if isinstance(value, str) else value

    container = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg
    return OmegaConf.create(clean(container))


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


_NO_DEFAULT = object()


def bad(key: str, value: Any, expected: str, default: Any = _NO_DEFAULT) -> str:
    """One problem line: ``key=value is not valid: expected ... (default: ...).``"""
    line = f"{key}={value!r} is not valid: expected {expected}"
    shown = "null" if default is None else repr(default)  # as the YAML and the command line spell it
    return line + (f" (default: {shown})." if default is not _NO_DEFAULT else ".")


def type_problems(cfg: DictConfig, defaults: DictConfig, keys: Sequence[str]) -> List[str]:
    """The overridden keys that hold a value of another type than their default."""
    found = []
    for key in keys:
        default = OmegaConf.select(defaults, key, default=None, throw_on_missing=False)
        value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if not _compatible(default, value):
            found.append(bad(key, value, _type_name(default), default))
    return found


def check_types(cfg: DictConfig, defaults: DictConfig, keys: Sequence[str]) -> None:
    """Raises ConfigError (one line per problem) when overridden keys hold values of another type."""
    _raise(type_problems(cfg, defaults, keys))


def _raise(found: Sequence[str]) -> None:
    if found:
        raise ConfigError("\n".join(found))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Checker:
    """Collects problem lines for a config; the default of a key comes from ``defaults`` when given."""

    def __init__(self, cfg: DictConfig, defaults: Optional[DictConfig] = None):
        self.cfg, self.defaults, self.found = cfg, defaults, []

    def get(self, key: str) -> Any:
        return OmegaConf.select(self.cfg, key, default=None, throw_on_missing=False)

    def default(self, key: str) -> Any:
        if self.defaults is None:
            return _NO_DEFAULT
        return OmegaConf.select(self.defaults, key, default=_NO_DEFAULT, throw_on_missing=False)

    def add(self, line: str) -> None:
        if line not in self.found:
            self.found.append(line)

    def rule(self, key: str, ok, expected: str, optional: bool = False) -> None:
        """``key`` must pass ``ok`` (or be null when ``optional``)."""
        value = self.get(key)
        if value is None and (optional or OmegaConf.select(self.cfg, key, default=_NO_DEFAULT) is _NO_DEFAULT):
            return
        try:
            passed = bool(ok(value))
        except TypeError:
            passed = False
        if not passed:
            self.add(bad(key, value, expected + (" or null" if optional else ""), self.default(key)))

    def positive_int(self, key: str, optional: bool = False) -> None:
        self.rule(key, lambda v: _is_int(v) and v > 0, "a positive integer", optional)

    def choice(self, key: str, allowed: Sequence[str], optional: bool = False) -> None:
        value = self.get(key)
        if value is None and optional:
            return
        if value not in allowed:
            default = self.default(key)
            tail = f" (default: {default})" if default is not _NO_DEFAULT else ""
            self.add(f"{key}={value} is not valid. Available: {', '.join(allowed)}{tail}")


def process_problems(check: "_Checker", prefix: str = "") -> None:
    """The settings TensorFlow takes once per process (``zoo.environ``), as ``train.py`` (under
    ``trainer.``), ``evaluate.py`` and the bench name them: ``intra_op_threads``,
    ``inter_op_threads`` (positive integers) and ``onednn`` (a bool), each null = TensorFlow's default."""
    check.positive_int(f"{prefix}intra_op_threads", optional=True)
    check.positive_int(f"{prefix}inter_op_threads", optional=True)
    check.rule(f"{prefix}onednn", lambda v: isinstance(v, bool), "true or false", optional=True)


DECODING_RULES = (  # key, test, what is allowed
    ("beam_size", lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    ("alpha", lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    ("beta", lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    ("temperature", lambda v: _is_number(v) and v > 0, "a number > 0"),
    ("top_k", lambda v: _is_int(v) and v >= 0, "an integer >= 0 (0 = all)"),
    ("top_p", lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
    ("max_length", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    ("seed", _is_int, "an integer"),
)
# Decoding keys that only one strategy reads: set on the command line with another, they would do nothing.
DECODING_USED_BY = {"alpha": "beam", "beta": "beam", "temperature": "sample", "top_k": "sample", "top_p": "sample"}


def decoding_problems(check: "_Checker", optional: bool) -> None:
    """``decoding.*``: the strategy and the ranges of its settings (``optional``: null = as exported)."""
    if check.get("decoding") is None:
        return
    check.choice("decoding.strategy", catalog.DECODING_STRATEGIES, optional=optional)
    for key, ok, expected in DECODING_RULES:
        if OmegaConf.select(check.cfg, f"decoding.{key}", default=_NO_DEFAULT) is not _NO_DEFAULT:
            check.rule(f"decoding.{key}", ok, expected, optional=optional or key == "max_length")


def target_vocabulary_bound(data: Any) -> Optional[Tuple[int, str]]:
    """``(most ids, why)``: the largest target vocabulary ``data`` can build (the 4 reserved tokens
    included), known from its config before any data is read, or None when only the built
    vocabulary tells (``zoo.export.translator.check_decoding`` checks it then, before the model).

    A dataset declares it in ``TARGET_VOCABULARY`` (``zoo/data/<name>.py``, read without importing):
    ``symbols`` (a fixed alphabet: ISO dates), ``symbols_from`` (the data key that holds the alphabet)
    or ``size_from`` (the data key that caps the vocabulary's size), each for the ``tokenizers`` listed."""
    if data is None or not isinstance(data.get("name"), str):
        return None
    declared = catalog.data_literal(str(data.get("name")), "TARGET_VOCABULARY")
    if not declared or data.get("tokenizer", "char") not in declared.get("tokenizers", ()):
        return None
    reserved = len(SPECIALS)
    if "symbols" in declared:
        return reserved + len(set(declared["symbols"])), f"data={data.name}: {declared['why']}"
    if "symbols_from" in declared:
        symbols = data.get(declared["symbols_from"])
        if isinstance(symbols, str) and symbols:
            key = declared["symbols_from"]
            return reserved + len(set(symbols)), f"data.{key} has {len(set(symbols))} symbols"
        return None
    size = data.get(declared.get("size_from", ""))
    if _is_int(size) and size > reserved:
        return size, f"data.{declared['size_from']}={size} ids, the reserved ones included"
    return None


def vocabulary_problems(check: "_Checker") -> None:
    """``decoding.beam_size`` (and ``top_k``) larger than the target vocabulary the data config allows
    (``target_vocabulary_bound``): the search would need more distinct continuations than exist."""
    bound = target_vocabulary_bound(check.cfg.get("data"))
    if bound is None:
        return
    ids, why = bound
    producible = ids - len(SPECIALS) + 1  # every content token, and <eos>
    beam, top_k = check.get("decoding.beam_size"), check.get("decoding.top_k")
    if _is_int(beam) and beam > producible:
        default = check.default("decoding.beam_size")
        check.add(f"decoding.beam_size={beam} is larger than the target vocabulary allows: at most {producible} tokens "
                  f"can follow <bos> ({why}). Use decoding.beam_size<={producible}"
                  + (f" (default: {default})." if default is not _NO_DEFAULT else "."))
    if _is_int(top_k) and top_k > ids:
        check.add(f"decoding.top_k={top_k} is larger than the target vocabulary: at most {ids} ids ({why}). "
                  f"Use decoding.top_k<={ids}, or 0 for all (default: 0).")


def trainer_problems(trainer: Any, defaults: Optional[DictConfig] = None) -> List[str]:
    """The engine's keys of ``cfg.trainer`` (strategy, precision, device, checkpoints, sizes)."""
    check = _Checker(OmegaConf.create({"trainer": OmegaConf.to_container(trainer, resolve=True)
                                       if OmegaConf.is_config(trainer) else dict(trainer)}), defaults)
    check.positive_int("trainer.epochs")
    check.positive_int("trainer.batch_size")
    check.positive_int("trainer.steps_per_epoch", optional=True)
    check.positive_int("trainer.checkpoint_every_steps", optional=True)
    check.rule("trainer.keep_checkpoints", lambda v: _is_int(v) and v >= 1, "an integer >= 1")
    check.rule("trainer.early_stopping_patience", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    check.rule("trainer.early_stopping_min_delta", lambda v: _is_number(v) and v >= 0, "a number >= 0")
    check.rule("trainer.label_smoothing", lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)")
    check.rule("trainer.clipnorm", lambda v: _is_number(v) and v > 0, "a positive number", optional=True)
    check.rule("trainer.max_minutes", lambda v: _is_number(v) and v > 0, "a positive number", optional=True)
    check.choice("trainer.verbose", (0, 1, 2))
    check.choice("trainer.strategy", catalog.STRATEGIES)
    check.choice("trainer.precision", catalog.PRECISIONS)
    check.choice("trainer.device", catalog.DEVICES)
    process_problems(check, "trainer.")
    if check.get("trainer.strategy") == "multi_worker" and not os.environ.get("TF_CONFIG"):
        check.add("trainer.strategy=multi_worker needs TF_CONFIG in the environment "
                  "(the cluster and this worker's index; see README 'Scaling out').")
    return check.found


def train_problems(cfg: DictConfig, defaults: Optional[DictConfig] = None, overridden: Sequence[str] = ()) -> List[str]:
    """Every problem of a composed training config, one line each, before any TensorFlow import.

    ``defaults`` (the config of the same groups without the key overrides) names each key's default;
    ``overridden`` (the keys set on the command line) lets settings that would do nothing be named.
    """
    check = _Checker(cfg, defaults)
    models = options("model")
    model = cfg.model.get("name")
    if model not in models:
        return [f"Unknown model '{model}'. Available: {', '.join(models)}"]
    model_task, data_task = cfg.model.get("task", "seq2seq"), cfg.data.get("task", "seq2seq")
    if model_task != data_task:
        fitting = catalog.models(data_task)
        check.add(f"model={model} is a {model_task} model and data={cfg.data.name} a {data_task} task. "
                  f"Models for data={cfg.data.name}: {', '.join(fitting) or 'none'}")
    known = catalog.model_keys(model)
    for key in (k for k in cfg.model if k not in known):
        hint = " (debug=smoke sizes the sequence models with model.embed_dim: run this one without it)" \
            if key == "embed_dim" else ""
        check.add(f"model.{key}={cfg.model[key]!r}: model={model} has no key {key}{hint}. "
                  f"Its keys: {', '.join(k for k in known if k not in ('name', 'task'))}")
    if cfg.data.get("tokenizer") is not None:
        check.choice("data.tokenizer", catalog.tokenizers())
    attention = cfg.model.get("attention")
    if attention is not None and catalog.model_attention_kind(model) == "self":
        self_attention_problems(check, model, str(attention), overridden)
    elif attention is not None and attention not in alignment_attentions():
        check.add(f"model.attention={attention} does not work with model {model}: "
                  f"it needs an alignment attention. Available: {', '.join(alignment_attentions())}")
    elif attention is not None:
        alignment_width_problems(check, model, str(attention))
    for key in ("num_kv_heads", "attention_window"):
        if key in cfg.model:
            check.positive_int(f"model.{key}", optional=True)
    for key in ("embed_dim", "hidden_size", "intermediate_dim", "num_layers", "num_heads", "max_length"):
        if key in cfg.model:
            check.positive_int(f"model.{key}")
    for key in ("dropout", "attention_dropout"):
        if key in cfg.model:
            check.rule(f"model.{key}", lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)")
    declared_problems(check, "model", catalog.model_constraints(model))
    if attention in catalog.options("attention"):  # the layer's declared rules, named as the command line spells them
        declared_problems(check, "model.attention_options", catalog.attention_constraints(str(attention)))
    for line in trainer_problems(cfg.trainer, defaults):
        check.add(line)
    task_kind_problems(check, model, model_task)
    check.choice("optimizer.name", catalog.OPTIMIZERS)
    check.choice("optimizer.decay", catalog.LR_DECAYS)
    check.rule("optimizer.learning_rate", lambda v: _is_number(v) and v > 0, "a positive number")
    check.rule("optimizer.warmup_steps", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    check.rule("seed", _is_int, "an integer")
    check.choice("kernels", kernels.MODES)
    decoding_problems(check, optional=False)
    vocabulary_problems(check)
    strategy = check.get("decoding.strategy")
    for key in overridden:
        name = key.partition("decoding.")[2]
        if key.startswith("decoding.") and name in DECODING_USED_BY and strategy != DECODING_USED_BY[name]:
            check.add(f"{key}={check.get(key)!r} does nothing with decoding.strategy={strategy}: it is read by "
                      f"decoding.strategy={DECODING_USED_BY[name]} only. Add decoding.strategy="
                      f"{DECODING_USED_BY[name]} (or decoding={DECODING_USED_BY[name]}), or drop {key}.")
    if "model.max_length" in overridden and model == "transformer" and check.get("model.positions") != "learned":
        check.add(f"model.max_length={check.get('model.max_length')!r} does nothing with model.positions="
                  f"{check.get('model.positions')}: only learned positions have a table of that size. "
                  f"Add model.positions=learned, or drop model.max_length.")
    if check.get("tracking.register_as") is not None:
        for key in ("tracking.export", "tracking.log_pyfunc"):
            if check.get(key) is False:
                check.add(f"tracking.register_as={check.get('tracking.register_as')} registers the run's pyfunc model, "
                          f"which {key}=false does not write. Drop {key}=false, or drop tracking.register_as "
                          f"(default: true).")
    alias = check.get("tracking.alias")
    if isinstance(alias, str) and alias.lower() == "latest":
        check.add("tracking.alias=latest is reserved by MLflow's model registry (models:/<name>/latest is the "
                  "newest version). Choose another alias, e.g. tracking.alias=champion (default: current).")
    data_problems(check)
    resume = check.get("trainer.resume")
    if resume is not None and str(resume) != "last":
        run_problems(check, "trainer.resume", str(resume), check.get("tracking.uri"), artifact=None)
    elif resume is None and store.is_server(store.tracking_uri(check.get("tracking.uri"))):
        try:
            store.check_reachable(store.tracking_uri(check.get("tracking.uri")))
        except store.StoreError as error:
            check.add(f"tracking.uri={redact_uri(store.tracking_uri(check.get('tracking.uri')))}: {error}.")
    return check.found


def _spelled(value: Any) -> str:
    """A value as the command line spells it (``true``, ``mirrored``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def task_kind_problems(check: "_Checker", model: str, task: str) -> None:
    """``trainer.*`` settings the task kind of ``model`` cannot train with, one line each naming the key,
    the value and the setting that works: the rules the kind declares (``TRAINER_CONSTRAINTS`` in
    ``zoo/training/<task>.py``, read without importing it)."""
    constraints = catalog.task_trainer_constraints(task)
    trainer = check.get("trainer")
    values = OmegaConf.to_container(trainer, resolve=True) if OmegaConf.is_config(trainer) else dict(trainer or {})
    for problem in checks.constraint_problems(constraints, values):
        rule = next(r for r in constraints if r["key"] == problem["key"])
        key, default = f"trainer.{problem['key']}", check.default(f"trainer.{problem['key']}")
        if any(line.startswith(f"{key}=") and " is not valid" in line for line in check.found):
            continue  # not a valid value at all: said already
        if rule["rule"] == "one_of":  # the first value allowed, as the command line spells it
            fix = rule["values"][0]
            tail = "" if default is _NO_DEFAULT else " (the default)" if default == fix else \
                f" (default: {_spelled(default)})"
            use = f"{key}={_spelled(fix)}{tail}"
        else:
            use = f"trainer.{problem['fix']}"
        check.add(f"{key}={_spelled(problem['value'])} does not work with model={model} (task: {task}): "
                  f"{rule.get('why') or 'expected ' + problem['expected']}. Use {use}.")


# Scores with no weights between the decoder's query h_t and the memory's h_s, h_t^T h_s (and its scaled
# form): the two must be equally wide. The other alignment scores learn a W or a v between them.
UNPROJECTED_SCORES = ("dot", "scaled_dot")


def alignment_widths(model: str, cfg) -> Optional[tuple]:
    """``(query, memory, where the memory's width comes from)``: the widths an alignment attention scores in
    ``model`` (its ``model.*`` config), or None for a model whose widths are always equal or unknown here."""
    if model == "bahdanau":  # the previous decoder state; the encoder's states, both directions concatenated
        hidden = cfg.get("hidden_size")
        twice = bool(cfg.get("bidirectional"))
        if _is_int(hidden):
            return hidden, hidden * (2 if twice else 1), \
                f"the bidirectional encoder's 2 x {hidden}" if twice else "model.hidden_size"
    if model == "show_attend_tell":  # h_{t-1}; the CNN grid's D = filters * 2^(conv_layers - 1) channels
        hidden, filters, layers = cfg.get("hidden_size"), cfg.get("filters"), cfg.get("conv_layers")
        if all(_is_int(v) and v > 0 for v in (hidden, filters, layers)):
            return hidden, filters * 2 ** (layers - 1), \
                f"the CNN grid's channels, model.filters x 2^(model.conv_layers - 1) = {filters} x {2 ** (layers - 1)}"
    if model == "listen_attend_spell":  # the speller's state; the listener's frames, 2 x its units
        hidden, units = cfg.get("hidden_size"), cfg.get("listener_units")
        if _is_int(hidden) and _is_int(units):
            return hidden, 2 * units, f"the listener's frames, 2 x model.listener_units = 2 x {units}"
    return None


def alignment_width_problems(check: "_Checker", model: str, attention: str) -> None:
    """An unprojected score (``dot``, ``scaled_dot``, or a local attention scoring with one) where ``model``'s
    query and memory differ in width: one line naming both widths and what makes them fit."""
    scoring = check.get("model.attention_options.scoring") if attention in ("local_m", "local_p") else attention
    if scoring not in UNPROJECTED_SCORES:
        return
    widths = alignment_widths(model, check.cfg.model)
    if widths is None or widths[0] == widths[1]:
        return
    query, memory, source = widths
    what = f"model.attention={attention}" + (f" with model.attention_options.scoring={scoring}"
                                            if scoring != attention else "")
    fixes = {"bahdanau": "model.bidirectional=false, or model=luong (its memory is model.hidden_size wide)",
             "show_attend_tell": f"model.hidden_size={memory}",
             "listen_attend_spell": f"model.listener_units={query // 2}" if query % 2 == 0 else
             f"model.hidden_size={memory}"}[model]
    check.add(f"{what} scores h_t^T h_s, so the query and the memory must be equally wide; model={model}'s query "
              f"(model.hidden_size) is {query} wide and its memory {memory} ({source}). Use {fixes}, or an "
              f"attention with weights between them (general, concat, additive).")


def self_attention_problems(check: "_Checker", model: str, attention: str, overridden: Sequence[str]) -> None:
    """``model.attention`` of a model whose attention is its self-attention (``ATTENTION_KIND = "self"`` in
    its module: the Transformer): ``multi_head`` or a ``kind: self`` attention, one that can run causally
    where the model's is (``CAUSAL``; ``causal: false`` in the attention's YAML: Linformer), and
    ``model.attention_options.*`` without the options the model sets itself (``OWNED_OPTIONS``)."""
    allowed = catalog.self_attentions()
    if attention not in allowed:
        check.add(f"model.attention={attention} is not a self-attention, which model={model} needs for its "
                  f"encoder and decoder. Available: {', '.join(allowed)} (default: multi_head)")
        return
    causal_ones = [a for a in allowed if catalog.attention_causal(a)]
    if catalog.model_literal(model, "CAUSAL", False) and not catalog.attention_causal(attention):
        check.add(f"model.attention={attention} cannot be causal (causal: false in conf/attention/{attention}.yaml: "
                  f"it mixes positions along the whole sequence), and model={model}'s decoder attends causally. "
                  f"Use one of {', '.join(causal_ones)}, or {attention} with an encoder-only model.")
    owned = {"num_heads": "model.num_heads", "key_dim": "model.embed_dim / model.num_heads",
             "value_dim": "model.embed_dim / model.num_heads", "dropout": "model.attention_dropout",
             "num_kv_heads": "model.num_kv_heads", "sliding_window": "model.attention_window"}
    for key in overridden:
        option = key.partition("model.attention_options.")[2]
        if option in catalog.model_literal(model, "OWNED_OPTIONS", ()):
            check.add(f"{key}={check.get(key)!r} is set by model={model} itself, the same for every layer: "
                      f"use {owned.get(option, 'model.' + option)} instead.")


def declared_problems(check: "_Checker", group: str, constraints) -> None:
    """The rules a component declares (its ``CONSTRAINTS``) that ``<group>.*`` breaks, with defaults."""
    node = OmegaConf.select(check.cfg, group, default=None, throw_on_missing=False)
    if not OmegaConf.is_dict(node):
        return
    values = OmegaConf.to_container(node, resolve=True)
    defaults = {k: check.default(f"{group}.{k}") for k in values}
    for line in checks.problem_lines(constraints, values, group,
                                     {k: v for k, v in defaults.items() if v is not _NO_DEFAULT}):
        check.add(line)


def patch_problems(model, data) -> List[str]:
    """A model cutting the image into patches (``model.patch_size``: vision_transformer) on a
    ``data.height x data.width`` canvas: the patches must tile it, and learned positions cover their number."""
    size, height, width = (model or {}).get("patch_size"), data.get("height"), data.get("width")
    if not all(_is_int(v) and v > 0 for v in (size, height, width)):
        return []  # absent, or not a positive integer: its own rule says so
    if height % size or width % size:
        fits = [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]
        nearest = min(fits, key=lambda p: (abs(p - size), -p))
        return [f"model.patch_size={size} does not tile the {height}x{width} canvas (data.height x data.width): "
                f"expected a divisor of both; e.g. model.patch_size={nearest}."]
    rows, columns, max_length = height // size, width // size, model.get("max_length")
    grid = model.get("grid_positions") is True  # 2-D: a learned position per row and per column of patches
    patches, what = (max(rows, columns), "rows or columns of patches") if grid else (rows * columns, "patches")
    if model.get("positions") == "learned" and _is_int(max_length) and max_length < patches:
        return [f"model.max_length={max_length} is too small for learned positions over the {patches} {what} of "
                f"{size}x{size} pixels of a {height}x{width} canvas; e.g. model.max_length={patches} or a larger "
                f"model.patch_size."]
    return []


def data_problems(check: "_Checker") -> None:
    """Data keys checkable without reading the data: files that must exist, sizes, names."""
    data = check.cfg.get("data")
    if data is None:
        return
    if data.get("name") != "tatoeba":  # the rules the dataset declares (CONSTRAINTS in zoo/data/<name>.py)
        declared_problems(check, "data", catalog.data_constraints(str(data.get("name"))))
        if data.get("name") == "spoken_digits":  # the recordings' zip: found, a zip of recordings, speakers
            for line in spoken_digits_problems(data):
                check.add(line)
        if data.get("name") == "digit_strings":  # the longest row of digits must fit the canvas
            canvas = catalog.digit_canvas_problem(*(data.get(k) for k in ("max_digits", "height", "width", "scale",
                                                                          "max_gap")))
            if canvas:
                check.add(canvas)
            for line in patch_problems(check.cfg.get("model"), data):  # model.patch_size must tile the canvas
                check.add(line)
        if "test_min_length" in data or "test_max_length" in data:
            for line in test_length_problems(OmegaConf.to_container(data, resolve=True)):
                check.add(line)
        if data.get("name") == "listops" and data.get("path"):  # LRA's TSV files, judged by their first lines
            try:
                catalog.check_listops_head(str(data.get("path")))
            except CorpusError as error:
                check.add(f"data.path={data.get('path')}: {error}")
            except OSError as error:
                check.add(f"data.path={data.get('path')} cannot be read ({error.strerror or error}).")
        return
    path = data.get("path")
    if path:
        resolved = Path(os.path.expanduser(str(path)))
        if not resolved.is_file():
            what = "is a directory, not a file" if resolved.is_dir() else "does not exist"
            check.add(f"data.path={path} {what} (looked at {resolved.absolute()}; relative paths are relative to "
                      f"the working directory). Point data.path at a manythings.org pair file (.zip, or the .txt "
                      f"inside it) (default: null = look for data.pair in $ZOO_DATA_DIR and the cache).")
        else:
            corpus_head_problem(check, f"data.path={path}", resolved, data.get("pair"))
    elif data.get("pair") is not None:
        pair = data.get("pair")
        check.rule("data.pair", lambda v: isinstance(v, str) and catalog.PAIR_PATTERN.match(v),
                   "a manythings.org pair name like 'fra-eng' or 'deu-eng'")
        missing = corpus_problem(data)
        if missing:
            check.add(missing)
        elif isinstance(pair, str) and catalog.PAIR_PATTERN.match(pair):
            found = catalog.find_pair_file(pair, data.get("cache_dir"))
            if found is not None:
                corpus_head_problem(check, f"data.pair={pair}", found, pair)
    for key in ("max_examples", "max_len", "train_size", "max_size"):
        check.positive_int(f"data.{key}", optional=True)
    check.rule("data.max_size", lambda v: v > 4, "more than the 4 reserved tokens", optional=True)
    check.positive_int("data.min_freq")
    for key in ("val_size", "test_size"):
        check.rule(f"data.{key}", lambda v: _is_number(v) and v >= 0,
                   "a fraction in (0, 1) of the pairs, a number of pairs, or 0 (use the training pairs)")


def test_length_problems(data: Dict[str, Any]) -> List[str]:
    """``data.test_min_length`` / ``data.test_max_length``: a test length range apart from training's
    (``data=reverse``'s length generalisation), each an integer >= 1 or null (= the training range's
    end), the range not empty once its nulls are filled in. One line per problem; ``zoo.data.reverse``
    raises the same lines."""
    found = []
    for key in ("test_min_length", "test_max_length"):
        value = data.get(key)
        if value is not None and (not _is_int(value) or value < 1):
            found.append(f"data.{key}={value!r} is not valid: expected an integer >= 1, or null for the training "
                         f"range's {'min_length' if key == 'test_min_length' else 'max_length'} (default: null).")
    if found:
        return found
    low = data.get("test_min_length") if data.get("test_min_length") is not None else data.get("min_length")
    high = data.get("test_max_length") if data.get("test_max_length") is not None else data.get("max_length")
    if _is_int(low) and _is_int(high) and low > high:
        named = [f"data.{k}={data.get(k)!r}" for k in ("test_min_length", "test_max_length") if data.get(k) is not None]
        filled = [f"data.{k}={v}" for k, v, t in (("min_length", low, "test_min_length"),
                                                    ("max_length", high, "test_max_length")) if data.get(t) is None]
        found.append(f"{' and '.join(named)} give an empty test length range {low}-{high}"
                     f"{' (' + ', '.join(filled) + ' fills in the null)' if filled else ''}: "
                     f"expected test_min_length <= test_max_length; e.g. data.test_min_length={high} "
                     f"or data.test_max_length={low}.")
    return found


def corpus_head_problem(check: "_Checker", key: str, path: Path, pair: Any) -> None:
    """The corpus file ``key`` names, judged by its start (``zoo.catalog.check_head``: a zip's
    directory and first lines, in milliseconds): a truncated zip, an empty file or one column is
    refused here, before TensorFlow starts, with the line the full read would give."""
    language = pair.split("-")[0] if isinstance(pair, str) and catalog.PAIR_PATTERN.match(pair) else None
    try:
        catalog.check_head(path, language)
    except CorpusError as error:
        check.add(f"{key}: {error}")
    except OSError as error:  # unreadable (permissions): the full read would fail the same way
        check.add(f"{key}: {path} cannot be read ({error.strerror or error}).")


def corpus_problem(data) -> Optional[str]:
    """For a Tatoeba ``data`` config that names a pair (no ``data.path``, no ``data.download``): what to
    put where when the pair is in neither ``$ZOO_DATA_DIR`` nor the cache, else None. Looks for files
    only (``zoo.catalog.find_pair_file``, as ``zoo.data.manythings.resolve_path``), before TensorFlow
    starts; reading them comes later."""
    pair = data.get("pair")
    if (data.get("name") != "tatoeba" or data.get("path") or data.get("download") or not isinstance(pair, str)
            or not catalog.PAIR_PATTERN.match(pair)):
        return None
    if catalog.find_pair_file(pair, data.get("cache_dir")) is not None:
        return None
    return catalog.pair_not_found(pair, data.get("cache_dir"), data.get("url"))


def spoken_digits_problems(data) -> List[str]:
    """``data=spoken_digits``: the Free Spoken Digit Dataset's zip must be found (``data.path``, else
    ``$ZOO_DATA_DIR``, else the cache: ``zoo.catalog.find_fsdd``), be a zip of its recordings, and
    ``data.test_speakers`` must name some of its speakers, not all; judged from the zip's directory."""
    path, cache_dir = data.get("path"), data.get("cache_dir")
    found = catalog.find_fsdd(path, cache_dir)
    if found is None:
        return [catalog.fsdd_not_found(path, cache_dir)]
    key = f"data.path={path}" if path else f"{found}"
    speakers = data.get("test_speakers")
    speakers = list(speakers) if isinstance(speakers, (list, tuple)) or OmegaConf.is_list(speakers) else speakers
    if speakers is not None and not isinstance(speakers, list):
        return [f"data.test_speakers={speakers!r} is not valid: expected a list of speakers, e.g. "
                f"data.test_speakers=[theo] (default: [])."]
    try:
        problem = catalog.fsdd_speaker_problem(found, speakers)
    except CorpusError as error:
        return [f"{key}: {error}"]
    return [problem] if problem else []


def run_problems(check: "_Checker", key: str, run_id: str, configured_uri: Optional[str],
                 artifact: Optional[str] = "saved_model") -> Optional[dict]:
    """``key=<run id>`` must name a run of the store (and hold ``artifact``); returns the run or None."""
    uri = store.tracking_uri(configured_uri)
    try:
        run = store.find_run(uri, run_id)
    except store.NotChecked:
        return None  # the server takes only MLflow's own authentication: MLflow answers when the run starts
    except store.StoreError as error:
        check.add(f"{key}={run_id}: {error}.")
        return None
    if run is None or run.get("lifecycle_stage") == "deleted":
        check.add(f"{key}={run_id} is not a run in {redact_uri(uri)}. Copy a run id from `mlflow runs list` or the MLflow UI, "
                  f"or set MLFLOW_TRACKING_URI to the store that has it.")
        return None
    if artifact is not None and store.has_artifact(uri, run, artifact) is False:
        check.add(f"{key}={run_id} has no {artifact}/ artifact (run status {run.get('status')}): a run of train.py "
                  f"has one once it has finished, unless it ran with tracking.export=false. Pick a run that has one.")
    return run


def evaluate_problems(cfg: DictConfig, defaults: Optional[DictConfig] = None) -> List[str]:
    """Every problem of an evaluation config, one line each, before TensorFlow (and MLflow) start."""
    check = _Checker(cfg, defaults)
    given = [k for k in ("run_id", "saved_model", "model_uri") if cfg.get(k) is not None]
    if len(given) != 1:
        check.add("Give exactly one of run_id=<MLflow run id>, saved_model=<directory> or "
                  f"model_uri=<runs:/... | models:/...>. Received: "
                  f"{', '.join(f'{k}={cfg.get(k)}' for k in given) or 'none'}")
    check.choice("split", ("train", "val", "test"))
    check.positive_int("batch_size")
    check.positive_int("bootstrap_samples")
    check.choice("kernels", kernels.MODES)
    process_problems(check)
    if cfg.get("data") is not None and data_name(cfg.data) not in catalog.datasets():
        check.add(f"data={data_name(cfg.data)} is not valid. Available: {', '.join(catalog.datasets())} "
                  f"(default: null = the data the model was trained on)")
    decoding_problems(check, optional=True)
    uri = cfg.get("tracking", {}).get("uri")
    if cfg.get("saved_model") is not None:
        path = Path(os.path.expanduser(str(cfg.saved_model)))
        if not path.is_dir():
            check.add(f"saved_model={cfg.saved_model} does not exist or is not a directory (looked at "
                      f"{path.absolute()}). Give the saved_model/ directory train.py exported.")
        elif not (path / "saved_model.pb").is_file():
            check.add(f"saved_model={cfg.saved_model} is not a SavedModel directory (no saved_model.pb there). "
                      f"Give the saved_model/ directory train.py exported, e.g. from `mlflow artifacts download`.")
        elif not cfg.get("interactive") and not (path / "assets.extra" / "config.yaml").is_file():
            check.add(f"saved_model={cfg.saved_model} has no assets.extra/config.yaml: it was not exported by "
                      f"train.py, so the data to score it on is unknown. Use interactive=true to translate with it.")
    if cfg.get("run_id") is not None:
        run_problems(check, "run_id", str(cfg.run_id), uri)
    if cfg.get("compare_to") is not None:
        run_problems(check, "compare_to", str(cfg.compare_to), uri)
    if cfg.get("model_uri") is not None:
        model_uri_problems(check, str(cfg.model_uri), uri)
    return check.found


def model_uri_problems(check: "_Checker", model_uri: str, configured_uri: Optional[str]) -> None:
    """``runs:/<id>/<path>`` must name a run with that artifact; ``models:/<name>/<version|@alias>`` a version."""
    uri = store.tracking_uri(configured_uri)
    if model_uri.startswith("runs:/"):
        run_id, _, path = model_uri[len("runs:/"):].partition("/")
        run = run_problems(check, "model_uri", run_id, configured_uri, artifact=None)
        if run is not None and path and store.has_artifact(uri, run, path) is False:
            check.add(f"model_uri={model_uri}: run {run_id} has no artifact '{path}'. train.py logs the model "
                      f"as runs:/{run_id}/model.")
    elif model_uri.startswith("models:/"):
        rest = model_uri[len("models:/"):]
        name, alias, version = rest, None, None
        if "@" in rest:
            name, _, alias = rest.partition("@")
        elif "/" in rest:
            name, _, version = rest.partition("/")
        try:
            found = store.find_model_version(uri, name, version=version, alias=alias)
        except store.NotChecked:
            return
        except store.StoreError as error:
            check.add(f"model_uri={model_uri}: {error}.")
            return
        if found is None:
            check.add(f"model_uri={model_uri} is not a registered model version in {redact_uri(uri)}. Expected "
                      f"models:/<name>/<version> or models:/<name>@<alias> of a registered model.")
    else:
        check.add(f"model_uri={model_uri} is not valid: expected runs:/<run id>/model or models:/<name>/<version> "
                  f"or models:/<name>@<alias>.")


def store_problems(flag: str, configured_uri: Optional[str]) -> List[str]:
    """The store a tool reads must be there: a SQLite file that exists, a server that answers."""
    uri = store.tracking_uri(configured_uri)
    path = store.sqlite_path(uri)
    try:
        if path is not None and not path.is_file():
            raise store.StoreError(f"there is no MLflow store at {path.absolute()} (no such file)")
        store.check_reachable(uri)
    except store.StoreError as error:
        return [f"{flag}={redact_uri(uri)}: {error}. Train a model first (python train.py), or point {flag} or "
                f"MLFLOW_TRACKING_URI at the store that has the runs."]
    return []


def compare_problems(data: Optional[str], metric: str, tracking_uri: Optional[str], by_length: bool,
                     out: Optional[str], no_log: bool, by_length_metrics: Sequence[str] = (),
                     sweep: bool = False, runs: Sequence[Tuple[str, str, Optional[str]]] = (),
                     explorer: bool = False) -> List[str]:
    """``python -m zoo.compare`` arguments, checked before TensorFlow and MLflow start
    (``by_length_metrics``: ``zoo.metrics.by_length_names()``, which the caller reads; with ``sweep``,
    ``--no-log`` keeps the summary off the parent run). ``runs``: ``(flag, run id, artifact)`` of the
    run ids given, each of which must be in the store (and hold ``artifact`` unless it is None)."""
    found = []
    if data is not None and data not in catalog.datasets():
        found.append(f"--data={data} is not valid. Available: {', '.join(catalog.datasets())} (default: all data)")
    if by_length and explorer:
        found.append("--explorer and --by-length are two comparisons: run one, then the other.")
    elif by_length:
        column = metric.split("_", 1)[1] if metric.startswith(("test_", "val_", "train_")) else metric
        if column not in by_length_metrics:
            found.append(f"--metric={metric} has no scores by length. Available: "
                         f"{', '.join('test_' + m for m in by_length_metrics)} "
                         f"(default: test_exact_match)")
    if (by_length or explorer) and out is not None and not Path(out).expanduser().absolute().parent.is_dir():
        found.append(f"--out={out}: the folder {Path(out).expanduser().absolute().parent} does not exist.")
    if not (by_length or explorer):
        for flag, value in (("--out", out), ("--no-log", (no_log and not sweep) or None)):
            if value is not None:
                found.append(f"{flag}={value} does nothing without --by-length or --explorer: add one, or drop "
                             f"{flag}.")
    unreachable = store_problems("--tracking-uri", tracking_uri)
    if runs and not unreachable:
        check = _Checker(OmegaConf.create({}))
        for flag, run_id, artifact in runs:
            run_problems(check, flag, run_id, tracking_uri, artifact=artifact)
        found += check.found
    return found + unreachable


# A bench size's own counts (``size.<name>.<key>`` in conf/bench.yaml), each falling back, when null, to
# the global one named here: read by ``bench_rounds``, checked by ``bench_problems``.
BENCH_SIZE_COUNTS = {"rounds": "train.rounds", "fixed_rounds": "decode.fixed_rounds"}


def bench_rounds(cfg: Any, size: str, key: str) -> int:
    """``size.<size>.<key>`` of a bench config, or, where it is null, its global count (``BENCH_SIZE_COUNTS``)."""
    own = cfg.size[size].get(key)
    return int(own if own is not None else OmegaConf.select(cfg, BENCH_SIZE_COUNTS[key]))


# The peers ``python -m zoo.bench lengths=[...]`` measures beside the zoo's self-attentions (zoo.bench.lengths).
LENGTH_REFERENCES = {"keras_mha": "keras.layers.MultiHeadAttention"}


def bench_lengths_problems(cfg: Any) -> List[str]:
    """``python -m zoo.bench lengths=[...]``: the lengths (at least two different positive integers, for a
    growth exponent) and ``length_bench``'s attentions, references, sizes, counts, limits and options."""
    check = _Checker(cfg)
    lengths = cfg.get("lengths")
    shown = OmegaConf.to_container(lengths) if OmegaConf.is_list(lengths) else lengths
    if not (OmegaConf.is_list(lengths) and all(_is_int(t) and t >= 1 for t in lengths)
            and len(set(lengths)) >= 2):
        check.add(f"lengths={shown!r} is not valid: expected a list of at least two different integers >= 1, "
                  f"e.g. lengths=[256,1024,4096,16384] (default: null, the full bench).")
    allowed = catalog.self_attentions()
    for key, names in (("length_bench.attentions", allowed), ("length_bench.targets.linear_time", allowed),
                       ("length_bench.references", list(LENGTH_REFERENCES))):
        value = check.get(key)
        for name in (value if OmegaConf.is_list(value) else [] if value is None else [value]):
            if name not in names:
                check.add(f"{key}: '{name}' is not valid. Available: {', '.join(names)}")
    for key in ("batch", "d_model", "num_heads", "repeats"):
        check.positive_int(f"length_bench.{key}")
    heads, width = check.get("length_bench.num_heads"), check.get("length_bench.d_model")
    if _is_int(heads) and _is_int(width) and heads > 0 and width > 0 and width % heads:
        check.add(f"length_bench.d_model={width} is not valid: expected a multiple of length_bench.num_heads "
                  f"({heads}).")
    check.rule("length_bench.repeat_budget_s", lambda v: _is_number(v) and v >= 0, "a number >= 0")
    check.rule("length_bench.time_limit_s", lambda v: _is_number(v) and v > 0, "a number > 0")
    check.rule("length_bench.memory_limit_mb", lambda v: _is_number(v) and v > 0, "a number > 0", optional=True)
    check.positive_int("length_bench.mmap_threshold_kb", optional=True)
    for name, given in (check.get("length_bench.options") or {}).items():
        if name not in allowed:
            check.add(f"length_bench.options.{name}: '{name}' is not valid. Available: {', '.join(allowed)}")
            continue
        known = [k for k in OmegaConf.load(CONF_DIR / "attention" / f"{name}.yaml") if k not in ("name", "kind")]
        for key in given or {}:
            if key not in known or key == "num_heads":
                check.add(f"length_bench.options.{name}.{key} is not valid. Available: "
                          f"{', '.join(k for k in known if k != 'num_heads')} (conf/attention/{name}.yaml; "
                          f"num_heads is length_bench.num_heads)")
    for mode in cfg.get("kernels") or []:
        if mode not in kernels.MODES:
            check.add(f"kernels: '{mode}' is not valid. Available: {', '.join(kernels.MODES)} "
                      f"(default: [fast, reference])")
    process_problems(check)
    return check.found


def bench_problems(cfg: Any) -> List[str]:
    """``python -m zoo.bench`` settings (``conf/bench.yaml`` composed with the command line), checked before
    TensorFlow starts: sizes and the corpora they read, models, counts, and the ``input_wait`` training
    command line; with ``lengths``, what ``bench_lengths_problems`` checks instead."""
    if cfg.get("lengths") is not None:
        return bench_lengths_problems(cfg)
    found = []
    sizes = list(cfg.get("sizes") or [])
    for size in sizes:
        if size not in cfg.size:
            found.append(f"sizes: '{size}' is not a size. Available: {', '.join(cfg.size)} (default: [small, base])")
    if cfg.get("models") is not None:
        allowed = catalog.models("seq2seq")
        for name in cfg.models:
            if name not in allowed:
                found.append(f"models: '{name}' is not a sequence model. Available: {', '.join(allowed)} "
                             f"(default: null, all of them)")
    for key, least in (("train.batches", 1), ("train.rounds", 1), ("train.warmup", 0), ("decode.batch", 1),
                       ("decode.recompute_tokens", 1), ("decode.recompute_batch", 1), ("decode.latency_calls", 1),
                       ("decode.fixed_rounds", 1), ("matmul.n", 1), ("matmul.repeats", 1)):
        value = OmegaConf.select(cfg, key)
        if not _is_int(value) or value < least:
            found.append(f"{key}={value!r} is not valid: expected an integer >= {least}.")
    for size in sizes:
        for key, default in BENCH_SIZE_COUNTS.items():
            value = cfg.size[size].get(key) if size in cfg.size else None
            if value is not None and (not _is_int(value) or value < 1):
                found.append(f"size.{size}.{key}={value!r} is not valid: expected an integer >= 1, or null for "
                             f"{default} ({OmegaConf.select(cfg, default)}).")
    for mode in cfg.get("kernels") or []:
        if mode not in kernels.MODES:
            found.append(f"kernels: '{mode}' is not valid. Available: {', '.join(kernels.MODES)} "
                         f"(default: [fast, reference])")
    check = _Checker(cfg)
    process_problems(check)
    found += check.found
    for size in sizes:
        missing = corpus_problem(cfg.size[size].data) if size in cfg.size else None
        if missing:
            found.append(f"sizes: [{size}] needs its corpus. {missing}")
    overrides = (cfg.get("input_wait") or {}).get("overrides")
    if overrides is not None:
        found += [f"input_wait.overrides: {line}" for line in problems(list(overrides), "train")]
    return found


def validate_train(cfg: DictConfig) -> None:
    """Raises ConfigError (every problem, one line each) for a composed training config."""
    _raise(train_problems(cfg))


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
    key, _, value = override.partition("=")
    return not value.startswith("{") and (CONF_DIR / key.lstrip("+~").split("@")[0]).is_dir()


def _key(override: str) -> str:
    return override.split("=")[0].lstrip("+~")


_REFUSED = re.compile(r"(?:Could not override|Could not find|Key|Could not append to config\. An item is already at)"
                      r" '([^']+)'")


def _refused(error: Exception, overrides: List[str]) -> List[str]:
    """The overrides Hydra's ``error`` names (by key, or by group for a missing group choice)."""
    match = _REFUSED.search(str(error))
    if not match:
        return []
    named = match.group(1)
    group = named.rpartition("/")[0] if "Could not find" in match.group(0) else None
    return [o for o in overrides if _key(o) == named or (group and _key(o).split("@")[0] == group)
            or (not group and named.startswith(_key(o) + "."))]


def _compose_dropping(build, overrides: List[str], defaults, found):
    """``build(overrides)``; each override Hydra refuses gets its line in ``found`` and is
    dropped (the one the error names; else found by building one at a time). Returns
    ``(cfg, kept overrides)``."""
    kept = list(overrides)
    while True:
        try:
            return build(kept), kept
        except Exception as error:  # noqa: BLE001 - composition errors become one line
            message = _hydra_message(error, defaults)
            culprits = _refused(error, kept)
            if not culprits:
                break
            found.append(message)
            kept = [o for o in kept if o not in culprits]
    good: List[str] = []
    for override in kept:
        try:
            build(good + [override])
            good.append(override)
        except Exception as error:  # noqa: BLE001
            found.append(_hydra_message(error, defaults))
    return build(good), good


def _compose_app(config_name: Optional[str] = None, overrides: Sequence[str] = ()) -> DictConfig:
    """``hydra.compose(config_name, overrides)`` (inside ``initialize_config_dir``) by the same steps
    of Hydra's config loader, less the ``hydra`` node that ``compose`` builds (launcher, sweeper,
    logging, help: half of its work) and then deletes: the config to check is the same. (A config
    that overrides Hydra's own groups, as evaluate.yaml does, is composed with them.)"""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.defaults_list import create_defaults_list
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException
    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException

    loader = GlobalHydra.instance().hydra.config_loader
    try:
        parsed, repo = loader._parse_overrides_and_create_caching_repo(config_name, list(overrides))
        primary = repo.load_config(config_name).defaults_list or []  # evaluate.yaml overrides hydra/job_logging
        hydra_too = any(getattr(d, "override", False) and str(getattr(d, "group", "")).startswith("hydra/")
                        for d in primary)
        defaults = create_defaults_list(repo=repo, config_name=config_name, overrides_list=parsed,
                                        prepend_hydra=hydra_too, skip_missing=False)
        cfg = loader._compose_config_from_defaults_list(defaults=defaults.defaults, repo=repo)
        OmegaConf.set_struct(cfg, True)
        ConfigLoaderImpl._apply_overrides_to_config(defaults.config_overrides, cfg)
    except OmegaConfBaseException as error:
        raise ConfigCompositionException().with_traceback(sys.exc_info()[2]) from error
    with open_dict(cfg):
        cfg.pop("hydra", None)  # what the primary config sets for Hydra (hydra.job.chdir, callbacks)
    return cfg


def _compose_collecting(compose, config_name: str, candidate: List[str]):
    """``(cfg, defaults, problems, applied keys)``: composes ``candidate``, and when Hydra refuses an
    override, names it and composes without it, so every bad override gets its line.

    Hydra composes once, with the group choices only (``defaults``: what each key's default is);
    the value overrides are then applied to a copy of that config by Hydra's own step for them,
    which is what composing everything does after the same group choices. (A second composition
    built the same config and took half of the time a bad command line waits for its answer.)"""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    groups = [o for o in candidate if _is_group(o)]
    others = [o for o in candidate if not _is_group(o)]
    found: List[str] = []
    defaults, good_groups = _compose_dropping(lambda kept: compose(config_name=config_name, overrides=kept),
                                              groups, None, found)
    for override in groups:
        if override not in good_groups:  # keys under a group that was not chosen are not checked
            node = _key(override).split("@")[-1]
            others = [o for o in others if not _key(o).startswith(node + ".")]

    def apply(kept):
        cfg = copy.deepcopy(defaults)  # struct, as Hydra leaves it before it applies the values
        ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(kept), cfg)
        return cfg

    cfg, applied = _compose_dropping(apply, others, defaults, found)
    return cfg, defaults, found, [_key(o) for o in applied]


def problems(argv: Sequence[str], config_name: str = "train") -> List[str]:
    """Every problem of the command line ``argv``, one line each ([] when it is good).

    Checks: group choices exist (``model=nope``), keys exist, values have the type of their
    default (``trainer.epochs=abc``), ranges and cross-field rules (``train_problems``,
    ``evaluate_problems``), files and run ids that must exist. Sweeps (``-m a=x,y``) are checked
    one value at a time. Hydra's own flags are left to Hydra. Never imports TensorFlow or MLflow.
    """
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return []  # --help, --cfg, ...: Hydra's business
    overrides = hydra_overrides([a for a in argv if not a.startswith("-") and not a.startswith("hydra")],
                                config_name)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as error:  # noqa: BLE001 - Hydra's parse errors
        return [f"Could not parse the command line: {str(error).splitlines()[0]}"]

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

    found: List[str] = []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            for candidate in candidates:
                cfg, defaults, composing, keys = _compose_collecting(_compose_app, config_name, candidate)
                typed = type_problems(cfg, defaults, keys)
                lines = []
                if config_name == "train":
                    lines = train_problems(cfg, defaults, keys)
                elif config_name == "evaluate":
                    lines = evaluate_problems(cfg, defaults)
                mistyped = tuple(line.split("=")[0] + "=" for line in typed)  # one line per key: its type
                lines = composing + typed + [line for line in lines if not line.startswith(mistyped)]
                found.extend(line for line in lines if line not in found)
    finally:
        GlobalHydra.instance().clear()
    return found


def precheck(argv: Sequence[str], config_name: str = "train") -> Optional[str]:
    """The first problem of the command line ``argv`` (see ``problems``), or None."""
    found = problems(argv, config_name)
    return found[0] if found else None


def exit_on_bad_command_line(config_name: str) -> None:
    """For entry points: print every problem, one line each, and exit 2 if the command line is wrong."""
    found = problems(sys.argv[1:], config_name)
    if found:
        print_errors(found)
        sys.exit(2)
    sys.argv[1:] = hydra_overrides(sys.argv[1:], config_name)


def print_errors(lines: Any) -> None:
    """``error: <line>`` on stderr for each problem (a list, or a ConfigError of one line per problem)."""
    if isinstance(lines, BaseException):
        lines = str(lines).splitlines()
    for line in lines:
        print(f"error: {line}", file=sys.stderr)


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ start-up chatter off the terminal (users may set their own level)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import logging

    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
