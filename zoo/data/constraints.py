"""Rules of data.<key> that several generated datasets declare alike, as literals: a dataset's
``CONSTRAINTS`` adds them (``SPLIT_SIZES + LENGTH_RANGE + (...)``), and the validator reads the sum
without importing anything (zoo.catalog.data_constraints follows the names)."""

# data.train_size, data.val_size, data.test_size: examples generated for each split.
SPLIT_SIZES = (
    {"rule": "at_least", "key": "train_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "val_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "test_size", "min": 1, "integer": True},
)
# data.min_length <= data.max_length: the lengths drawn for an example.
LENGTH_RANGE = (
    {"rule": "at_least", "key": "min_length", "min": 1, "integer": True},
    {"rule": "not_above", "key": "min_length", "of": "max_length"},
    {"rule": "at_least", "key": "max_length", "min": 1, "integer": True},
)
