"""Go's ``math/rand`` (the seeded global source of Go 1.x), so trace replays draw the
same shuffles, resamples and node orders as the FGD simulator, which is a Go program.

The source is Go's additive lagged Fibonacci generator (607 words, tap 273) seeded by
a Park-Miller sequence XORed with the ``rngCooked`` table (``go_rng_cooked.txt``,
BSD-licensed, see ``GO_LICENSE``). ``Intn``, ``Perm`` and ``Shuffle`` follow Go's
definitions, including Shuffle's use of Lemire's multiply-shift bound.
"""

from __future__ import annotations

from importlib import resources

_LEN = 607
_TAP = 273
_INT32_MAX = (1 << 31) - 1
_MASK64 = (1 << 64) - 1
_MASK63 = (1 << 63) - 1


def _cooked() -> list[int]:
    text = resources.files("scheduler.sim").joinpath("go_rng_cooked.txt").read_text()
    values = [int(line) for line in text.splitlines() if line and not line.startswith("#")]
    if len(values) != _LEN:
        raise RuntimeError(f"go_rng_cooked.txt holds {len(values)} values, expected {_LEN}")
    return values


_COOKED = _cooked()


def _seedrand(x: int) -> int:
    """One step of the Park-Miller generator Go uses to seed (x in int32 range)."""
    hi, lo = int(x / 44488), x - int(x / 44488) * 44488  # Go truncates toward zero
    x = 48271 * lo - 3399 * hi
    return x + _INT32_MAX if x < 0 else x


class GoRand:
    """A ``rand.New(rand.NewSource(seed))`` equivalent."""

    def __init__(self, seed: int) -> None:
        self._vec = [0] * _LEN
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self._tap = 0
        self._feed = _LEN - _TAP
        seed %= _INT32_MAX  # Python's % is non-negative for a positive modulus
        if seed == 0:
            seed = 89482311
        x = seed
        for i in range(-20, _LEN):
            x = _seedrand(x)
            if i >= 0:
                u = (x << 40) & _MASK64
                x = _seedrand(x)
                u ^= (x << 20) & _MASK64
                x = _seedrand(x)
                u ^= x
                u ^= _COOKED[i] & _MASK64
                self._vec[i] = u

    def uint64(self) -> int:
        self._tap = self._tap - 1 if self._tap else _LEN - 1
        self._feed = self._feed - 1 if self._feed else _LEN - 1
        x = (self._vec[self._feed] + self._vec[self._tap]) & _MASK64
        self._vec[self._feed] = x
        return x

    def int63(self) -> int:
        return self.uint64() & _MASK63

    def int31(self) -> int:
        return self.int63() >> 32

    def uint32(self) -> int:
        return (self.int63() >> 31) & 0xFFFFFFFF

    def int31n(self, n: int) -> int:
        """``Int31n``: rejection sampling (used by ``Intn`` and ``Perm``)."""
        if n <= 0:
            raise ValueError("invalid argument to Int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        limit = _INT32_MAX - (1 << 31) % n
        v = self.int31()
        while v > limit:
            v = self.int31()
        return v % n

    def intn(self, n: int) -> int:
        if n > _INT32_MAX:
            raise ValueError("GoRand.intn supports n < 2**31 only")
        return self.int31n(n)

    def _int31n_lemire(self, n: int) -> int:
        """The unexported ``int31n`` that ``Shuffle`` uses (multiply and shift)."""
        product = self.uint32() * n
        low = product & 0xFFFFFFFF
        if low < n:
            threshold = ((1 << 32) - n) % n
            while low < threshold:
                product = self.uint32() * n
                low = product & 0xFFFFFFFF
        return product >> 32

    def shuffle(self, items: list[object]) -> None:
        for i in range(len(items) - 1, 0, -1):
            j = self._int31n_lemire(i + 1)
            items[i], items[j] = items[j], items[i]

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    def float64(self) -> float:
        while True:
            f = self.int63() / (1 << 63)
            if f < 1.0:
                return f
