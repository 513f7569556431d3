"""Registry, configs and serialization of every attention layer (parametrized over ``names()``)."""

import doctest
import importlib
import inspect
import pkgutil
from pathlib import Path

import keras
import numpy as np
import pytest
import yaml

import zoo.attention

from attention_helpers import ALL_NAMES, fixed_seed, kind, layer_class, run, sample_inputs  # noqa: F401 (fixed_seed: autouse fixture)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "attention"


def load_yaml(name):
    with open(CONF_DIR / f"{name}.yaml") as f:
        return yaml.safe_load(f)


def yaml_kwargs(name):
    return {k: v for k, v in load_yaml(name).items() if k not in ("name", "kind")}


def constructor_defaults(name):
    params = inspect.signature(layer_class(name).__init__).parameters
    defaults = {k: p.default for k, p in params.items() if k != "self" and p.kind == p.POSITIONAL_OR_KEYWORD}
    if issubclass(layer_class(name), zoo.attention.BaseAttention) and len(layer_class(name).normalizers) > 1:
        # BaseAttention's `normalizer`, which the alignment layers take through **kwargs
        base = inspect.signature(zoo.attention.BaseAttention.__init__).parameters
        defaults.setdefault("normalizer", base["normalizer"].default)
    return defaults


def test_every_name_has_a_config_and_every_config_a_name():
    configs = sorted(p.stem for p in CONF_DIR.glob("*.yaml"))
    assert configs == zoo.attention.names()


def test_alignment_names_are_the_contract_layers():
    assert set(zoo.attention.alignment_names()) == {
        "dot", "scaled_dot", "general", "additive", "concat", "multi_head", "local_m", "local_p", "location",
        "key_value", "hard", "location_aware"}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_yaml_kind_is_the_kind_derived_from_the_class(name):
    # The YAML is the TensorFlow-free declaration the config validator reads; the registry derives
    # the kind from the class (BaseAttention subclass = alignment, start_index = positional).
    assert load_yaml(name)["kind"] == zoo.attention.attention_kind(layer_class(name)) == kind(name)


def test_register_attention_derives_the_kind_from_the_class():
    from zoo.attention.base_attention import ATTENTIONS

    @zoo.attention.register_attention("throwaway_alignment")
    class Throwaway(zoo.attention.BaseAttention):
        pass

    try:
        assert ATTENTIONS.meta("throwaway_alignment")["kind"] == "alignment"
        assert "throwaway_alignment" in zoo.attention.alignment_names()
    finally:
        ATTENTIONS.unregister("throwaway_alignment")
    assert zoo.attention.attention_kind(keras.layers.Dense) == "other"


@pytest.mark.parametrize("name", ALL_NAMES)
def test_config_matches_the_constructor(name):
    config = load_yaml(name)
    assert config["name"] == name
    assert config["kind"] == kind(name)
    # Exactly the constructor's keyword arguments, with the class defaults.
    assert yaml_kwargs(name) == constructor_defaults(name)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_create_with_config_builds_and_runs(name):
    layer = zoo.attention.create(name, **yaml_kwargs(name))
    outputs = run(name, layer, sample_inputs(name))
    assert layer.built
    for out in outputs:
        assert np.all(np.isfinite(out))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_get_config_round_trip_gives_identical_outputs(name):
    args = sample_inputs(name)
    layer = zoo.attention.create(name)
    expected = run(name, layer, args)
    config = layer.get_config()
    assert set(constructor_defaults(name)) <= set(config)
    clone = type(layer).from_config(config)
    run(name, clone, args)  # build
    clone.set_weights(layer.get_weights())
    for a, b in zip(run(name, clone, args), expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_keras_serialization_round_trip(name):
    args = sample_inputs(name)
    layer = zoo.attention.create(name)
    expected = run(name, layer, args)
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"].startswith("zoo>")
    clone = keras.saving.deserialize_keras_object(serialized)
    assert type(clone) is type(layer)
    run(name, clone, args)
    clone.set_weights(layer.get_weights())
    for a, b in zip(run(name, clone, args), expected):
        np.testing.assert_array_equal(a, b)


def test_unknown_name_lists_the_choices():
    with pytest.raises(ValueError, match=r"Unknown attention 'nope'\. Available: additive, .*dot"):
        zoo.attention.create("nope")


@pytest.mark.parametrize("name, kwargs, message", [
    ("concat", {"units": 0}, "argument `units`, expected a positive integer or None. Received: units=0"),
    ("multi_head", {"num_heads": 0}, "argument `num_heads`, expected a positive integer. Received: num_heads=0"),
    ("multi_head", {"scoring": "cosine"}, "argument `scoring`, expected one of 'scaled_dot', 'dot'"),
    ("multi_head", {"use_bias": "yes"}, "argument `use_bias`, expected a bool"),
    ("dot", {"dropout": 1.0}, "argument `dropout`, expected a float in [0, 1)"),
    ("local_m", {"window_size": -1}, "Received: window_size=-1"),
    ("local_p", {"scoring": "location"}, "argument `scoring`, expected one of"),
    ("location", {"max_length": 2.5}, "Received: max_length=2.5"),
    ("key_value", {"predict": 1}, "argument `predict`, expected a bool"),
    ("hard", {"temperature": 0.0}, "argument `temperature`, expected a positive number. Received: temperature=0.0"),
    ("hard", {"seed": "x"}, "argument `seed`, expected an integer or None"),
    ("self_attentive", {"hops": 0}, "Received: hops=0"),
    ("self_attentive", {"penalty": -1.0}, "argument `penalty`, expected a non-negative number"),
    ("co_attention", {"mode": "serial"}, "argument `mode`, expected one of 'parallel', 'alternating'"),
    ("nadaraya_watson", {"kernel": "triangular"}, "argument `kernel`, expected one of"),
    ("nadaraya_watson", {"bandwidth": 0}, "Received: bandwidth=0"),
    ("sinusoidal", {"max_wavelength": -1.0}, "argument `max_wavelength`, expected a positive number"),
    ("learned", {"max_length": 0}, "Received: max_length=0"),
    ("rotary", {"sequence_axis": 0}, "argument `sequence_axis`, expected a positive integer"),
])
def test_invalid_arguments_are_rejected_eagerly(name, kwargs, message):
    with pytest.raises(ValueError) as info:
        zoo.attention.create(name, **kwargs)
    assert "Received an invalid value for argument" in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("module", sorted(m.name for m in pkgutil.iter_modules(zoo.attention.__path__)))
def test_docstring_examples_run(module):
    mod = importlib.import_module(f"zoo.attention.{module}")
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(mod):
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed in zoo.attention.{module}"
