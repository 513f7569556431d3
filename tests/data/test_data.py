"""The data registries: datasets and tokenizers are discovered from their modules, named after
their configs, found without TensorFlow, and take their defaults from ``conf/data``."""

import inspect
import json

import pytest
from omegaconf import OmegaConf

from zoo.data import DATASETS, load_task, names
from zoo.data import tokenizers as tokenizers_package

from conftest import ROOT, compose, run_python

DATA_CONF = ROOT / "conf" / "data"
# Keys of conf/data/<name>.yaml that are not keyword defaults of the dataset's builder:
NOT_BUILDER_DEFAULTS = {
    "name": "the registry name itself",
    "task": "the kind of task, kept as the registry's meta (checked below)",
    "seed": "set by interpolation (${seed}): the run's seed; the builder's seed=0 is only for direct calls",
}


def data_yaml(name):
    return OmegaConf.load(DATA_CONF / f"{name}.yaml")


def keyword_defaults(function):
    return {p.name: p.default for p in inspect.signature(function).parameters.values()
            if p.default is not inspect.Parameter.empty}


def plain(value):
    return list(value) if isinstance(value, tuple) else value


def test_dataset_names_are_the_config_files():
    assert names() == DATASETS.names() == sorted(p.stem for p in DATA_CONF.glob("*.yaml"))
    assert {"dates", "kernel_regression", "reverse", "tatoeba"} <= set(names())
    for name in names():
        assert data_yaml(name).name == name


def test_unknown_data_names_the_choices():
    with pytest.raises(ValueError, match=f"Unknown data 'fra'. Available: {', '.join(names())}"):
        load_task({"name": "fra"})


def test_names_are_found_without_tensorflow():
    code = ("import json, sys\n"
            "import zoo.data, zoo.data.tokenizers, zoo.tokens\n"
            "import zoo.data.dates, zoo.data.reverse, zoo.data.tatoeba, zoo.data.kernel_regression\n"
            "out = {'data': zoo.data.names(), 'tokenizers': zoo.data.tokenizers.names(),\n"
            "       'tensorflow': 'tensorflow' in sys.modules}\n"
            "print(json.dumps(out))\n")
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["tensorflow"] is False
    assert out["data"] == names()
    assert {"char", "sentencepiece", "word", "wordpiece"} <= set(out["tokenizers"])
    pytest.importorskip("tensorflow")
    assert tokenizers_package.TOKENIZERS.names() == out["tokenizers"]  # every module registered its kind


@pytest.mark.parametrize("name", names())
def test_builder_defaults_are_the_config_values(name):
    builder = DATASETS.get(name)
    yaml = data_yaml(name)
    interpolated = {key for key in yaml if OmegaConf.is_interpolation(yaml, key)}
    assert interpolated <= set(NOT_BUILDER_DEFAULTS), f"interpolated keys to list above: {interpolated}"
    expected = {k: v for k, v in OmegaConf.to_container(yaml, resolve=False).items() if k not in NOT_BUILDER_DEFAULTS}
    defaults = {k: plain(v) for k, v in keyword_defaults(builder).items() if k != "seed"}
    assert defaults == expected
    assert DATASETS.meta(name).get("task", "seq2seq") == yaml.get("task", "seq2seq")


@pytest.mark.parametrize("name", names())
def test_data_yaml_tokenizers_are_registered(name):
    tokenizer = data_yaml(name).get("tokenizer")
    assert tokenizer is None or tokenizer in tokenizers_package.names()


def test_tokenizer_defaults_agree_with_every_data_config():
    tf = pytest.importorskip("tensorflow")  # noqa: F841
    from zoo.data.tokenizers import TOKENIZERS, fit_tokenizer

    functions = [fit_tokenizer] + [TOKENIZERS.get(kind).__init__ for kind in TOKENIZERS.names()]
    checked = set()
    for yaml_file in sorted(DATA_CONF.glob("*.yaml")):
        yaml = OmegaConf.to_container(OmegaConf.load(yaml_file), resolve=False)
        for function in functions:
            for key, default in keyword_defaults(function).items():
                if key in yaml and key != "name":  # name: the dataset's name, not the tokenizer's
                    assert default == yaml[key], f"{function.__qualname__}({key}={default!r}) vs {yaml_file.name}"
                    checked.add(key)
    assert checked == {"lowercase", "min_freq", "max_size"}
    for kind in TOKENIZERS.names():  # the hooks take every option from fit_tokenizer: no defaults of their own
        cls = TOKENIZERS.get(kind)
        assert cls.kind == kind
        assert keyword_defaults(cls.fit) == {}


def test_kernel_regression_loads_its_arrays_through_the_registry():
    from zoo.data.kernel_regression import generate

    cfg = compose(["experiment=nadaraya_watson"])
    data = load_task(cfg.data)
    expected = generate(seed=int(cfg.seed))
    assert sorted(data) == sorted(expected)
    for key in data:
        assert data[key].tolist() == expected[key].tolist()
