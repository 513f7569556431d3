import datetime as dt
import re

import pytest

from zoo.data import dates


def test_generation_is_deterministic_for_a_seed():
    assert dates.generate(500, seed=7) == dates.generate(500, seed=7)
    assert dates.generate(500, seed=7) != dates.generate(500, seed=8)


def test_splits_share_no_source():
    splits = dates.splits(3000, 300, 300, seed=1)
    seen = {name: set(src) for name, (src, _) in splits.items()}
    assert len(seen["train"]) == 3000 and len(seen["val"]) == 300 and len(seen["test"]) == 300
    assert not seen["train"] & seen["val"]
    assert not seen["train"] & seen["test"]
    assert not seen["val"] & seen["test"]


def test_every_rendering_of_the_window_determines_its_date():
    # Render every date of the window in every format: no source string may map to two dates.
    targets = {}
    day = dt.date(1950, 1, 1)
    while day <= dt.date(2049, 12, 31):
        for fmt in dates.FORMATS:
            source = dates.render(day, fmt)
            assert targets.setdefault(source, day) == day, f"{source!r} is both {targets[source]} and {day}"
        day += dt.timedelta(days=1)


def test_targets_are_iso_and_match_the_source():
    for source, target in dates.generate(2000, seed=3):
        date = dt.date.fromisoformat(target)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
        assert 1950 <= date.year <= 2049
        assert str(date.day) in source
        if any(w in source for w in dates.WEEKDAYS_ABBR):
            assert dates.WEEKDAYS_ABBR[date.weekday()] in source


def test_examples_from_the_issue_render_as_people_write_them():
    day = dt.date(2018, 5, 9)
    assert dates.render(day, "{weekday}, {d} {month} {yyyy}") == "wednesday, 9 may 2018"
    assert dates.render(day, "{d}/{m}/{yy}") == "9/5/18"
    assert dates.render(day, "{month} {dth}, {yyyy}") == "may 9th, 2018"
    assert dates.render(day, "{dd}.{mm}.{yyyy}") == "09.05.2018"
    assert dates.render(dt.date(1979, 1, 2), "{wd} {d} {mon} {yyyy}") == "tue 2 jan 1979"


def test_a_window_over_100_years_is_refused():
    with pytest.raises(ValueError, match="at most 100 years"):
        dates.generate(10, seed=0, min_year=1900, max_year=2049)
