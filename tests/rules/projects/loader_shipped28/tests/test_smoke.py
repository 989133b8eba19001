# A smoke test's overrides are not what the project ships: they turn nothing on for the loader rules.
OVERRIDES = ["data.num_workers=0", "data.persistent_workers=True"]


def test_overrides():
    assert "data.persistent_workers=True" in OVERRIDES
