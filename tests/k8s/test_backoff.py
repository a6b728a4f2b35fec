from itertools import islice

from scheduler.k8s.client.backoff import backoff_delays


def test_delays_double_from_1_s_to_30_s_and_stay_there() -> None:
    assert list(islice(backoff_delays(), 8)) == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
