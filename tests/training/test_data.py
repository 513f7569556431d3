"""Stage ``data``: an epoch's batch order is a function of seed and epoch; resumed epochs skip
exactly the steps done; XLA padding gives a bounded set of shapes."""

import numpy as np
import pytest

from conftest import compose

SMALL = ["debug=smoke", "data.train_size=200", "trainer.batch_size=16", "trainer.steps_per_epoch=null"]


@pytest.fixture(scope="module")
def data():
    from zoo.training.data import load_data

    return load_data(compose(SMALL))


def sources(ds):
    return [np.asarray(x[0]) for x, _ in ds]


def test_an_epochs_order_depends_on_seed_and_epoch_only(data):
    first, again = sources(data.train_batches(2)), sources(data.train_batches(2))
    assert len(first) == len(again) and all(np.array_equal(a, b) for a, b in zip(first, again))
    other = sources(data.train_batches(3))
    assert not all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(first, other))


def test_a_resumed_epoch_skips_the_steps_done(data):
    full, rest = sources(data.train_batches(1)), sources(data.train_batches(1, skip_steps=3))
    assert len(rest) == len(full) - 3
    assert all(np.array_equal(a, b) for a, b in zip(full[3:], rest))


def test_several_replicas_split_the_global_batches_one_replica_sees(data):
    from zoo.training.data import load_data

    two = load_data(compose(SMALL), replicas=2)
    assert two.replica_batch_size == 8
    whole = [(np.asarray(x[0]), np.asarray(y)) for x, y in data.train_batches(2) if y.shape[0] == 16]
    halves = [(np.asarray(x[0]), np.asarray(y)) for x, y in two.train_batches(2)]
    assert len(halves) == 2 * len(whole)  # partial batches left out, so every replica gets a part
    for (x, y), (x0, y0), (x1, y1) in zip(whole, halves[0::2], halves[1::2]):
        np.testing.assert_array_equal(np.concatenate([x0, x1]), x)
        np.testing.assert_array_equal(np.concatenate([y0, y1]), y)


def test_a_global_batch_that_does_not_split_is_refused():
    from zoo.errors import ConfigError
    from zoo.training.data import load_data

    with pytest.raises(ConfigError, match=r"trainer.batch_size=15 .* 2 replicas"):
        load_data(compose([*SMALL, "trainer.batch_size=15"]), replicas=2)


def test_padding_for_xla_bounds_the_shapes_and_keeps_every_token():
    from zoo.training.data import load_data

    overrides = [*SMALL, "trainer.jit_compile=true", "trainer.bucket_boundaries=[12,16,20]"]
    padded, plain = load_data(compose(overrides)), load_data(compose(overrides[:-2] + overrides[-1:]))
    shapes = {(x[0].shape, x[1].shape, y.shape) for x, y in padded.train_batches(1)}
    assert len(shapes) <= 4  # one per bucket
    assert all(s[0][0] == 16 for s in shapes)
    for (x, y), (xp, yp) in zip(plain.train_batches(1), padded.train_batches(1)):
        assert int(np.count_nonzero(y)) == int(np.count_nonzero(yp))
        assert int(np.count_nonzero(x[0])) == int(np.count_nonzero(xp[0]))


def rows_data(**kwargs):
    """A toy ``ArrayData``: rows 0..9 (validation 0..3), each holding two target tokens, batched by 3."""
    import tensorflow as tf

    from zoo.training.data import ArrayData

    class RowsData(ArrayData):
        def dataset(self, split, shuffle=False, seed=0):
            rows = tf.data.Dataset.range(10 if split == "train" else 4)
            return (rows.shuffle(10, seed=seed) if shuffle else rows).batch(self.batch_size)

        def train_rows(self):
            return 10

        def tokens_per_row(self):
            return 2.0

    return RowsData(task=None, batch_size=3, seed=7, **kwargs)


def batches(ds):
    return [np.asarray(b).tolist() for b in ds]


def test_array_data_epochs_are_seeded_cut_to_steps_and_skip_the_steps_done():
    """``ArrayData`` (story QA, classification, images): an epoch is every row once, shuffled by seed and
    epoch alone; ``steps_per_epoch`` repeats or cuts it; ``skip_steps`` drops the steps a resume did."""
    whole = rows_data(steps_per_epoch=None)
    first = batches(whole.train_batches(1))
    assert sorted(sum(first, [])) == list(range(10)) and [len(b) for b in first] == [3, 3, 3, 1]
    assert batches(whole.train_batches(1)) == first and batches(whole.train_batches(2)) != first
    assert batches(whole.train_batches(1, skip_steps=3)) == first[3:]
    assert batches(whole.val_batches()) == [[0, 1, 2], [3]]
    assert whole.tokens_per_epoch == 2.0 * 10
    five = rows_data(steps_per_epoch=5)  # past the 4 batches of a pass: the rows again
    assert len(batches(five.train_batches(1))) == 5 and five.tokens_per_epoch == 2.0 * 10
    two = rows_data(steps_per_epoch=2)
    assert batches(two.train_batches(1)) == first[:2] and two.tokens_per_epoch == 2.0 * 6
