"""Loading openb CSVs: good rows become pods and nodes, bad rows are reported with
file, line and column, and the load goes on."""

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.errors import TraceError
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.sim.catalog import node_list_path, pod_list_path
from scheduler.sim.openb_hami import TRACE_SPLIT_COUNT, trace_node_row, trace_pod_row
from scheduler.sim.trace import (
    TraceIssues,
    check_pods_against_nodes,
    load_nodes,
    load_pod_shapes,
    load_pods,
    load_timed_pods,
    trace_node_manifest,
    trace_pod_manifest,
)
from scheduler.state.fragmentation import pod_shape

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_default_trace_loads_cleanly() -> None:
    issues = TraceIssues()
    nodes = load_nodes(node_list_path(), issues)
    pods = load_pods(pod_list_path("default"), issues)
    check_pods_against_nodes(pods, nodes, issues)
    assert (len(nodes), sum(n.gpu_count for n in nodes), len(pods), issues.messages) == (1213, 6212, 8152, [])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        pytest.param(
            "p1,abc,1024,0,0,,LS,Running,0,1,0",
            "pods.csv:2: cpu_milli: 'abc' is not an integer",
            id="not a number",
        ),
        pytest.param(
            "p1,1000,-5,0,0,,LS,Running,0,1,0",
            "pods.csv:2: memory_mib: must be at least 0, got -5",
            id="negative",
        ),
        pytest.param(",1000,1024,0,0,,LS,Running,0,1,0", "pods.csv:2: name: empty pod name", id="no name"),
        pytest.param(
            "p1,1000,1024,2,500,,LS,Running,0,1,0",
            "pods.csv:2: gpu_milli: pod p1: a share (500) of 2 GPUs",
            id="share of several GPUs",
        ),
        pytest.param("p1,1000", "pods.csv:2: num_gpu: '' is not an integer", id="short row"),
        pytest.param(
            "p1," + "9" * 131_073 + ",1024,1,460,,LS,Running,0,1,0",
            "pods.csv:2: row: field larger than field limit",
            id="a field past the csv module's size limit",
        ),
    ],
)
def test_bad_pod_rows_are_reported_and_skipped(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + row + "\np2,1000,1024,1,460,,LS,Running,0,1,0\n")
    issues = TraceIssues()
    pods = load_pods(path, issues)
    assert [p.name for p in pods] == ["p2"]
    assert len(issues.messages) == 1, issues.messages
    assert issues.messages[0].startswith(message)
    shape_issues = TraceIssues()
    assert load_pod_shapes(path, shape_issues) == [pod_shape(pods[0])]
    assert shape_issues.messages == issues.messages


@pytest.mark.parametrize("trace", ["default", "gpushare40", "multigpu20", "gpuspec10"])
def test_the_shapes_of_a_trace_are_those_of_its_pods(trace: str) -> None:
    """``load_pod_shapes`` builds each distinct row once: the same shapes, in file order."""
    path = pod_list_path(trace)
    assert load_pod_shapes(path) == [pod_shape(pod) for pod in load_pods(path)]


@pytest.mark.parametrize(
    ("header", "rows"),
    [
        pytest.param(
            POD_HEADER,
            "p1,1000,1024,1,1200,,LS,Running,0,1,0\np2,1000,1024,1,1200,,LS,Running,0,1,0\n",
            id="a capped row twice: each reported with its own line and name",
        ),
        pytest.param(
            POD_HEADER,
            "p1,1000,1024,1,500,,LS,Running,0,1,0\n,1000,1024,1,500,,LS,Running,0,1,0\n"
            "p3,1000,1024,1,500,,LS,Running,0,1,0\n",
            id="a clean row's values again without a name",
        ),
        pytest.param(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n",
            "p1,1000,1024,1,500\n\np2,1000,1024,1,500\np3,1000\np4,1000,1024,1,500,extra\n",
            id="no gpu_spec column, a blank line, a short row, a long row",
        ),
        pytest.param(
            "gpu_milli,name,num_gpu,memory_mib,cpu_milli,gpu_spec\n",
            "500,p1,1,1024,1000,V100M16\n500,p2,1,1024,1000,V100M16\n500,p3,1,1024,1000,\n",
            id="columns in another order",
        ),
        pytest.param(
            POD_HEADER,
            "p1,1000,1024,2,500,,LS,Running,0,1,0\np2,1000,1024,2,500,,LS,Running,0,1,0\n",
            id="a refused row twice",
        ),
    ],
)
def test_shapes_read_as_the_pods_are(tmp_path: Path, header: str, rows: str) -> None:
    """``load_pod_shapes`` reads columns by position and checks each distinct row once:
    the shapes and the issues are ``load_pods``' all the same."""
    path = write(tmp_path, "pods.csv", header + rows)
    issues, shape_issues = TraceIssues(), TraceIssues()
    assert load_pod_shapes(path, shape_issues) == [pod_shape(p) for p in load_pods(path, issues)]
    assert shape_issues.messages == issues.messages


def test_capped_and_gpuless_shares_shape_as_their_pods(tmp_path: Path) -> None:
    rows = (
        "p1,1000,1024,1,1200,,LS,Running,0,1,0\n"  # capped at one GPU
        "p2,1000,1024,1,0,,LS,Running,0,1,0\n"  # no share: CPU only
        "p3,2000,1024,1,500,V100M16|V100M32,LS,Running,0,1,0\n"
        "p4,2000,1024,1,500,V100M16|V100M32,LS,Running,0,1,0\n"
    )
    path = write(tmp_path, "pods.csv", POD_HEADER + rows)
    issues, shape_issues = TraceIssues(), TraceIssues()
    assert load_pod_shapes(path, shape_issues) == [pod_shape(p) for p in load_pods(path, issues)]
    assert shape_issues.messages == issues.messages
    assert len(issues.messages) == 2


def test_unplaceable_pods_are_reported_and_kept(tmp_path: Path) -> None:
    nodes = load_nodes(
        write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,16384,2,T4\n")
    )
    pods = load_pods(
        write(
            tmp_path,
            "pods.csv",
            POD_HEADER
            + "big,64000,1024,0,0,,LS,Running,0,1,0\n"
            + "odd,1000,1024,1,500,H100|B200,LS,Running,0,1,0\n"
            + "many,1000,1024,4,1000,,LS,Running,0,1,0\n",
        )
    )
    issues = TraceIssues()
    check_pods_against_nodes(pods, nodes, issues)
    assert [p.name for p in pods] == ["big", "odd", "many"]
    assert issues.messages == [
        "pods.csv:2: pod big: cpu request larger than any node",
        "pods.csv:3: pod odd: gpu_spec: unknown GPU model(s) H100|B200 (the cluster has T4)",
        "pods.csv:4: pod many: num_gpu 4 more than any node has (2)",
    ]


def test_bad_node_rows(tmp_path: Path) -> None:
    issues = TraceIssues()
    nodes = load_nodes(
        write(
            tmp_path,
            "nodes.csv",
            "sn,cpu_milli,memory_mib,gpu,model\nn1,x,1,0,\nn2,8000,16384,16,G3\nn3,8000,16384,2,G3\n",
        ),
        issues,
    )
    assert [n.name for n in nodes] == ["n3"]
    assert issues.messages == [
        "nodes.csv:2: cpu_milli: 'x' is not an integer",
        "nodes.csv:3: gpu: 16 GPUs; at most 8 per node are supported",
    ]


@pytest.mark.parametrize(
    ("row", "warning"),
    [
        pytest.param("n1,64000,262144,2,T4", None, id="known model"),
        pytest.param("n1,64000,262144,0,", None, id="CPU node without a model"),
        pytest.param(
            "n1,64000,262144,2,H100",
            "nodes.csv:2: node n1: model: unknown GPU model 'H100' (known: A10, G2, G3, P100, T4, "
            "V100M16, V100M32); kept, its GPUs count as 16 GiB each and serve only pods that name "
            "no model or H100",
            id="unknown model",
        ),
        pytest.param(
            "n1,64000,262144,4,",
            "nodes.csv:2: node n1: model: no GPU model given (known: A10, G2, G3, P100, T4, V100M16, "
            "V100M32); kept, its GPUs count as 16 GiB each and serve only pods that name no model",
            id="GPUs without a model",
        ),
    ],
)
def test_a_gpu_node_of_an_unknown_model_is_warned_about_and_kept(
    tmp_path: Path, row: str, warning: str | None
) -> None:
    issues = TraceIssues()
    nodes = load_nodes(write(tmp_path, "nodes.csv", f"sn,cpu_milli,memory_mib,gpu,model\n{row}\n"), issues)
    assert [n.name for n in nodes] == ["n1"]
    assert issues.messages == ([] if warning is None else [warning])


def test_missing_columns_and_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="header: missing column"):
        load_pods(write(tmp_path, "pods.csv", "name,cpu\np,1\n"))
    with pytest.raises(ValueError, match="no such trace file"):
        load_pods(tmp_path / "absent.csv")
    with pytest.raises(ValueError, match="trace 'nope': name: no such file"):
        pod_list_path("nope")


@pytest.mark.parametrize(
    ("row", "gpu_resources", "annotations"),
    [
        ((12000, 16384, 1, 1000, ""), {"nvidia.com/gpu": "1"}, {}),
        (
            (6000, 12288, 1, 460, ""),
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "46", "nvidia.com/gpumem-percentage": "46"},
            {},
        ),
        ((88000, 327680, 8, 1000, ""), {"nvidia.com/gpu": "8"}, {}),
        (
            (16000, 32768, 1, 1000, "V100M16|V100M32"),
            {"nvidia.com/gpu": "1"},
            {"nvidia.com/use-gputype": "V100M16,V100M32"},
        ),
        ((4000, 15258, 0, 0, ""), {}, {}),
    ],
)
def test_a_trace_pod_is_a_hami_pod_and_back(
    row: tuple[int, int, int, int, str], gpu_resources: dict[str, str], annotations: dict[str, str]
) -> None:
    manifest = trace_pod_manifest("p", *row)
    requests = manifest["spec"]["containers"][0]["resources"]["requests"]
    assert {k: v for k, v in requests.items() if k.startswith("nvidia.com/")} == gpu_resources
    assert manifest["metadata"]["annotations"] == annotations
    assert trace_pod_row(pod_from_manifest(manifest)) == row


@pytest.mark.parametrize(
    ("row", "memory_mib"),
    [
        ((64000, 262144, 2, "P100"), 16384),
        ((96000, 786432, 8, "V100M32"), 32768),
        ((32000, 131072, 0, ""), 0),
    ],
)
def test_a_trace_node_is_a_hami_node_and_back(row: tuple[int, int, int, str], memory_mib: int) -> None:
    node = node_from_manifest(trace_node_manifest("n", *row))
    assert trace_node_row(node) == row
    assert node.gpu_sharing is bool(row[2])
    assert node.allocatable.get("nvidia.com/gpu", 0) == row[2] * TRACE_SPLIT_COUNT
    assert [g.memory_mib for g in node.gpus] == [memory_mib] * row[2]
    assert [g.type for g in node.gpus] == [f"NVIDIA-{row[3]}"] * row[2]


def test_a_share_that_is_no_whole_percent_is_reported(tmp_path: Path) -> None:
    issues = TraceIssues()
    pods = load_pods(
        write(tmp_path, "pods.csv", POD_HEADER + "p1,1000,1024,1,455,,LS,Running,0,1,0\n"), issues
    )
    assert pods == []
    assert issues.messages == ["pods.csv:2: gpu_milli: pod p1: 455 is not a multiple of 10 milli"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        pytest.param(
            "p1,1000,1024,0,0,,LS,Running,,5,0", "pods.csv:2: creation_time: missing time", id="missing"
        ),
        pytest.param(
            "p1,1000,1024,0,0,,LS,Running,7,,0",
            "pods.csv:2: deletion_time: missing time",
            id="missing deletion",
        ),
        pytest.param(
            "p1,1000,1024,0,0,,LS,Running,soon,5,0",
            "pods.csv:2: creation_time: 'soon' is not a time in seconds",
            id="not a number",
        ),
        pytest.param(
            "p1,1000,1024,0,0,,LS,Running,-3,5,0",
            "pods.csv:2: creation_time: must be a finite number of seconds at least 0, got -3",
            id="negative",
        ),
        pytest.param(
            "p1,1000,1024,0,0,,LS,Running,10,5,0",
            "pods.csv:2: deletion_time: pod p1: 5 is before its creation_time 10",
            id="deleted before created",
        ),
        pytest.param(
            "p1,abc,1024,0,0,,LS,Running,10,5,0",
            "pods.csv:2: cpu_milli: 'abc' is not an integer",
            id="a bad field is reported first",
        ),
    ],
)
def test_bad_times_are_reported_naming_row_and_column_and_skipped(
    tmp_path: Path, row: str, message: str
) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + row + "\np2,1000,1024,1,460,,LS,Running,3,3,3\n")
    issues = TraceIssues()
    timed = load_timed_pods(path, issues)
    assert ([(t.pod.name, t.creation_s, t.deletion_s) for t in timed], issues.messages) == (
        [("p2", 3.0, 3.0)],
        [message],
    )


def test_a_pod_list_without_times_is_refused_naming_the_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,0,0\n")
    assert [p.name for p in load_pods(path)] == ["p1"]  # the untimed loaders never need them
    with pytest.raises(TraceError, match="header: missing column\\(s\\) creation_time, deletion_time"):
        load_timed_pods(path)


def test_timed_pods_of_the_default_trace_are_its_pods_with_their_times() -> None:
    path = pod_list_path("default")
    issues = TraceIssues()
    timed = load_timed_pods(path, issues)
    assert issues.messages == []
    assert [t.pod for t in timed] == load_pods(path)
    assert [t.row for t in timed[:2]] == [(12000, 16384, 1, 1000, ""), (6000, 12288, 1, 460, "")]
    # openb-pod-0001,...,creation_time 427061, deletion_time 12902960
    assert (timed[1].creation_s, timed[1].deletion_s) == (427061.0, 12902960.0)
    assert all(t.deletion_s >= t.creation_s for t in timed)


FIELD = st.one_of(
    st.sampled_from(
        ["", "0", "1", "2", "8", "500", "1000", "1200", "-1", "x", " 7 ", "V100M16", "V100M16|P100"]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    columns=st.permutations(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos"]),
    rows=st.lists(st.lists(FIELD, max_size=9), max_size=12),
)
def test_fuzz_shapes_read_as_the_pods_are(
    tmp_path_factory: pytest.TempPathFactory, columns: list[str], rows: list[list[str]]
) -> None:
    """Whatever a pod list holds, ``load_pod_shapes`` gives ``load_pods``' shapes and
    issues (a bad row reported and skipped), or the same refusal of the whole file."""
    path = tmp_path_factory.mktemp("fuzz") / "pods.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows(rows)
    issues, shape_issues = TraceIssues(), TraceIssues()
    try:
        expected: list[object] = [pod_shape(p) for p in load_pods(path, issues)]
    except TraceError as error:
        expected = [type(error), str(error)]
    try:
        got: list[object] = list(load_pod_shapes(path, shape_issues))
    except TraceError as error:
        got = [type(error), str(error)]
    assert got == expected
    assert shape_issues.messages == issues.messages
