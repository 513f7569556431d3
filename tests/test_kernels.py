"""The switch (zoo/kernels.py): the mode from the command line or ZOO_KERNELS, and the dispatch."""

import pytest

from zoo import kernels


def test_mode_comes_from_the_environment_then_use(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {"mode": None, "export": False, "loaded": True})
    monkeypatch.delenv(kernels.ENVIRONMENT, raising=False)
    assert kernels.mode() == "fast"
    monkeypatch.setenv(kernels.ENVIRONMENT, "reference")
    assert kernels.mode() == "reference" and not kernels.fast()
    kernels.use("fast")
    assert kernels.mode() == "fast"
    with kernels.using("reference"):
        assert kernels.mode() == "reference"
    assert kernels.mode() == "fast"


def test_a_bad_mode_names_the_value_and_the_choices(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {"mode": None, "export": False, "loaded": True})
    monkeypatch.setenv(kernels.ENVIRONMENT, "quick")
    with pytest.raises(ValueError, match=r"ZOO_KERNELS='quick' is not valid. Available: fast, reference"):
        kernels.mode()
    with pytest.raises(ValueError, match=r"kernels='turbo' is not valid"):
        kernels.use("turbo")


def test_replaceable_calls_the_replacement_in_fast_mode_only(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {"mode": None, "export": False, "loaded": True})
    monkeypatch.setattr(kernels, "REPLACEMENTS", {})

    @kernels.replaceable
    def double(x):
        return 2 * x

    import keras

    @kernels.replaces(double.key, own_gradient=True, backends=(keras.backend.backend(),))
    def double_fast(x):
        return x + x + 0.5  # different on purpose: shows which one ran

    with kernels.using("reference"):
        assert double(3) == 6
    with kernels.using("fast"):
        assert double(3) == 6.5
        with kernels.exporting():  # a custom gradient is never traced into a SavedModel
            assert double(3) == 6
    assert double.reference(3) == 6

    @kernels.replaceable
    def triple(x):
        return 3 * x

    kernels.replaces(triple.key, backends=("no_such_backend",))(lambda x: -1)
    with kernels.using("fast"):  # a replacement for another Keras backend leaves the reference in place
        assert triple(2) == 6
    with pytest.raises(ValueError, match="already has a replacement"):
        kernels.replaces(double.key)(lambda x: x)


def test_train_config_refuses_an_unknown_mode_before_tensorflow():
    from zoo.config import problems

    found = problems(["kernels=turbo"])
    assert any("kernels=turbo is not valid. Available: fast, reference" in line for line in found), found
