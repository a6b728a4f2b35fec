"""The DRA test driver's names on the real node, without starting it (the driver runs
in tests/realnode/test_dra_on_a_real_node.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.realnode import dra
from devcluster.realnode.config import NodeLayout
from devcluster.realnode.node import RealNodeError


@pytest.mark.parametrize(
    ("claim", "request_name", "variable"),
    [
        pytest.param("gpu", "gpu", "claim_gpu_gpu", id="plain names"),
        # a template's claim: <pod>-<pod claim>-<random suffix>
        pytest.param("dra-gpu-x7k2p", "gpu", "claim_dra_gpu_x7k2p_gpu", id="dashes become underscores"),
        pytest.param("c.1", "r/sub", "claim_c_1_r_sub", id="dots and slashes too"),
    ],
)
def test_the_variable_a_prepared_claim_sets_follows_the_driver_s_cdi_go(
    claim: str, request_name: str, variable: str
) -> None:
    assert dra.claim_env_var(claim, request_name) == variable


def _layout(cache: Path, run: Path) -> NodeLayout:
    files = cache / "realnodes" / "rl-x"
    return NodeLayout("rl-x", files, run, cache / "realnode-images" / "containerd", "localhost/pause:v1")


def test_the_driver_registers_in_the_kubelet_s_root_dir_and_serves_from_the_run_folder(
    tmp_path: Path,
) -> None:
    layout = NodeLayout.of("rl-x", "localhost/pause:v1", cache=tmp_path)
    assert dra.registration_socket(layout) == (
        layout.kubelet_root / "plugins_registry" / "test-driver.cdi.k8s.io-reg.sock"
    )
    assert dra.plugin_data_dir(layout) == layout.run / "plugins"


@pytest.mark.parametrize(
    ("cache", "fits"),
    [
        pytest.param("/work/main/.cache", True, id="the checkout's cache"),
        # .../realnodes/rl-x/kubelet/plugins_registry/test-driver.cdi.k8s.io-reg.sock: 72 + the cache
        pytest.param("/c" + "x" * 33, True, id="35-byte cache: 107 bytes"),
        pytest.param("/c" + "x" * 34, False, id="36-byte cache: 108 bytes"),
    ],
)
def test_a_socket_path_too_long_for_bind_is_refused_up_front(cache: str, fits: bool) -> None:
    layout = _layout(Path(cache), Path("/run/rl-devcluster/rl-x"))
    if fits:
        dra.check_socket_paths(layout)
    else:
        with pytest.raises(RealNodeError, match="over the 107 a unix socket allows; set RL_DEVCLUSTER_CACHE"):
            dra.check_socket_paths(layout)


def test_only_the_driver_s_cdi_specs_are_its_own(tmp_path: Path) -> None:
    layout = _layout(tmp_path, tmp_path / "run")
    layout.cdi_specs.mkdir(parents=True)
    mine = layout.cdi_specs / f"{dra.DRIVER_NAME}-uid-1-gpu.json"
    mine.write_text("{}")
    (layout.cdi_specs / "other-vendor.json").write_text("{}")
    assert dra.cdi_specs(layout) == [mine]
