"""Go's math/rand, checked against values printed by Go itself (go1.26,
rand.New(rand.NewSource(seed)))."""

from scheduler.sim.gorand import GoRand


def test_seed_42_sequence() -> None:
    rng = GoRand(42)
    assert rng.int63() == 3440579354231278675
    items: list[object] = list(range(20))
    rng.shuffle(items)
    assert items == [18, 19, 15, 13, 10, 9, 14, 16, 17, 2, 8, 7, 4, 5, 12, 6, 0, 3, 11, 1]
    assert [rng.intn(8152) for _ in range(5)] == [4962, 2214, 2052, 7115, 5136]
    assert rng.perm(10) == [8, 2, 6, 7, 4, 1, 0, 3, 5, 9]
    assert rng.float64() == 0.9734799613956572


def test_seed_47_sequence() -> None:
    rng = GoRand(47)
    assert rng.int63() == 2131792501560531351
    items: list[object] = list(range(12))
    rng.shuffle(items)
    assert items == [3, 6, 4, 0, 2, 10, 7, 9, 11, 5, 8, 1]
    assert rng.intn(1000) == 284
    assert rng.perm(7) == [6, 4, 5, 1, 3, 0, 2]
