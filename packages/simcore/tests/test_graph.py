"""CapturedWork lifecycle: eager fallback with a recorded reason on CPU, versions and staleness, and on CUDA
graph replay that matches eager stepping (``-m gpu``)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from g1_model import g1_default_qpos
from simcore_scenes import cpu_config

import simcore
from simcore._src.reset import STATE_CHANNELS


@pytest.fixture(params=["mujoco", "mjwarp"])
def cpu_backend(request, small_model):
    return simcore.make_backend(request.param, small_model, cpu_config(num_envs=2, decimation=2))


def test_cpu_capture_falls_back_to_eager_and_replays_k_steps(cpu_backend):
    work = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="physics", steps_per_replay=3)
    before = cpu_backend.time.clone()
    work.capture()
    assert work.eager_fallback_reason == "cpu device"
    assert not work.graph_enabled and work.captures == 1 and work.replays == 0
    torch.testing.assert_close(cpu_backend.time, before)  # no warm-up when nothing is captured
    work.replay()
    torch.testing.assert_close(cpu_backend.time, before + 3 * cpu_backend.control_dt)
    diag = cpu_backend.diagnostics()
    assert diag.eager_fallback_reason == "cpu device" and diag.graph_enabled is False
    assert (diag.steps_per_replay, diag.graph_captures, diag.graph_replays, diag.graph_version) == (
        3,
        1,
        1,
        0,
    )
    assert diag.graphs["physics"]["replays"] == 1 and not diag.conditional_nodes_used


def test_require_graph_raises_instead_of_falling_back(cpu_backend):
    physics = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="physics")
    physics.capture()
    physics.replay()
    work = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="strict", require_graph=True)
    with pytest.raises(RuntimeError, match="requires a CUDA graph but would run eagerly: cpu device"):
        work.capture()
    diag = cpu_backend.diagnostics()  # still the capture in use, not the refused one
    assert (diag.eager_fallback_reason, diag.graph_captures, diag.graph_replays) == ("cpu device", 1, 1)
    disabled = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="off", enabled=False)
    disabled.capture()
    assert disabled.eager_fallback_reason == "disabled by config"
    assert cpu_backend.diagnostics().eager_fallback_reason == "disabled by config"  # the latest capture
    with pytest.raises(ValueError, match="enabled must be True or False, got 'no'"):
        simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="x", enabled="no")
    with pytest.raises(ValueError, match="backend must be a simcore backend"):
        simcore.CapturedWork(cpu_backend.step, backend=None, name="x")


def test_backend_without_graph_capabilities_falls_back_naming_them(small_model):
    backend = simcore.make_backend("mujoco", small_model, cpu_config(num_envs=1))
    backend.device = torch.device("cuda")  # pretend: the capability check comes before any CUDA call
    work = simcore.CapturedWork(backend.step, backend=backend, name="host", steps_per_replay=2)
    work.capture()
    assert work.eager_fallback_reason == (
        "backend 'mujoco' lacks ['EXTERNAL_GRAPH_CAPTURE', 'GRAPH_CAPTURE', 'MULTI_STEP_GRAPH']"
    )
    with pytest.raises(NotImplementedError, match="lacks EXTERNAL_GRAPH_CAPTURE"):
        backend.graph_capture_scope(None)


def test_invalidation_bumps_version_and_stale_replay_raises(cpu_backend):
    work = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="physics")
    with pytest.raises(RuntimeError, match="never captured"):
        work.replay()
    work.capture()
    work.replay()
    work.invalidate("model array replaced")
    assert work.version == 1 and work.is_stale
    with pytest.raises(
        RuntimeError, match=r"captured at version 0, current version 1 \(model array replaced\)"
    ):
        work.replay()
    work.capture()
    work.replay()
    assert (work.version, work.captures, work.replays) == (1, 2, 2)
    assert cpu_backend.diagnostics().graph_version == 1


def test_backend_structure_change_makes_the_capture_stale(cpu_backend):
    strict = simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="strict")
    lenient = simcore.CapturedWork(
        cpu_backend.step, backend=cpu_backend, name="lenient", recapture_when_stale=True
    )
    strict.capture()
    lenient.capture()
    cpu_backend.set_option("iterations", 5)
    with pytest.raises(RuntimeError, match="backend structure_version changed from 0 to 1"):
        strict.replay()
    before = cpu_backend.time.clone()
    lenient.replay()  # recaptures, then runs
    assert lenient.captures == 2 and lenient.version == 1
    torch.testing.assert_close(cpu_backend.time, before + cpu_backend.control_dt)
    cpu_backend.read_plan(bodies=("box",))  # a new plan changes what step() does: stale again
    assert lenient.is_stale


def test_arguments_are_validated(cpu_backend):
    with pytest.raises(ValueError, match="steps_per_replay must be an int >= 1"):
        simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="x", steps_per_replay=0)
    with pytest.raises(ValueError, match="fn must be callable"):
        simcore.CapturedWork(None, backend=cpu_backend, name="x")
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        simcore.CapturedWork(cpu_backend.step, backend=cpu_backend, name="")


# ============================================================================================== CUDA
def snapshot_state(backend: simcore.SimBackend) -> dict[str, torch.Tensor]:
    return {c: getattr(backend, c).clone() for c in STATE_CHANNELS}


def restore_state(backend: simcore.SimBackend, state: dict[str, torch.Tensor]) -> None:
    spec = backend.reset_spec(STATE_CHANNELS)
    backend.reset(torch.ones(backend.num_envs, dtype=torch.bool, device=backend.device), state, spec)


def assert_states_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    torch.testing.assert_close(a["qpos"], b["qpos"], rtol=0, atol=2e-5)
    torch.testing.assert_close(a["qvel"], b["qvel"], rtol=0, atol=2e-3)
    torch.testing.assert_close(a["time"], b["time"], rtol=0, atol=1e-6)


@pytest.fixture
def cuda_backend(small_model):
    backend = simcore.make_backend("mjwarp", small_model, simcore.SimConfig(64, decimation=2, device="cuda"))
    gen = torch.Generator(device="cuda").manual_seed(0)
    spec = backend.reset_spec(("qpos", "ctrl"))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.1 + 0.3 * torch.rand(64, device="cuda", generator=gen)
    payload["ctrl"].uniform_(-1, 1, generator=gen)
    backend.reset(torch.ones(64, dtype=torch.bool, device="cuda"), payload, spec)
    return backend


@pytest.mark.gpu
def test_k_step_graph_replay_matches_eager(cuda_backend):
    plan = cuda_backend.read_plan(bodies=("box", "forearm"), contact_bodies=("box",))
    work = simcore.CapturedWork(
        cuda_backend.step, backend=cuda_backend, name="physics", steps_per_replay=4, require_graph=True
    )
    work.capture()
    assert work.graph_enabled and work.eager_fallback_reason is None
    start = snapshot_state(cuda_backend)
    work.replay()
    graph_state, graph_pos = snapshot_state(cuda_backend), plan.body_pos_w.clone()
    restore_state(cuda_backend, start)
    for _ in range(4):
        cuda_backend.step()
    assert_states_close(graph_state, snapshot_state(cuda_backend))
    torch.testing.assert_close(graph_pos, plan.body_pos_w, rtol=0, atol=2e-5)
    diag = cuda_backend.diagnostics()
    assert diag.graph_enabled and diag.steps_per_replay == 4 and diag.graph_replays == 1
    assert diag.conditional_nodes_used == cuda_backend.uses_conditional_nodes


@pytest.mark.gpu
@pytest.mark.parametrize(
    "channels", [("qpos", "qvel", "ctrl"), ("qpos", "qvel", "body_mass", "geom_friction")]
)
def test_reset_inside_captured_graph_matches_eager(cuda_backend, channels):
    n = cuda_backend.num_envs
    spec = cuda_backend.reset_spec(channels)
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.5
    payload["qvel"].zero_()
    for name in channels[2:]:
        payload[name].mul_(1.5)
    mask = torch.arange(n, device="cuda") % 3 == 0

    def reset_then_step():
        cuda_backend.reset(mask, payload, spec)
        cuda_backend.step()

    work = simcore.CapturedWork(reset_then_step, backend=cuda_backend, name="reset", require_graph=True)
    work.capture()
    start = snapshot_state(cuda_backend)
    fields = {k: v.clone() for k, v in cuda_backend.model_fields.items()}
    work.replay()
    graph_state = snapshot_state(cuda_backend)
    restore_state(cuda_backend, start)
    for name, value in fields.items():
        cuda_backend.model_fields[name].copy_(value)
    reset_then_step()
    assert_states_close(graph_state, snapshot_state(cuda_backend))


@pytest.mark.gpu
def test_option_change_forces_recapture(cuda_backend):
    strict = simcore.CapturedWork(cuda_backend.step, backend=cuda_backend, name="strict", require_graph=True)
    lenient = simcore.CapturedWork(
        cuda_backend.step, backend=cuda_backend, name="lenient", require_graph=True, recapture_when_stale=True
    )
    strict.capture()
    lenient.capture()
    cuda_backend.set_option("gravity", (0.0, 0.0, -5.0))
    with pytest.raises(RuntimeError, match="stale"):
        strict.replay()
    start = snapshot_state(cuda_backend)
    lenient.replay()
    assert lenient.captures == 2 and lenient.graph_enabled
    graph_state = snapshot_state(cuda_backend)
    restore_state(cuda_backend, start)
    cuda_backend.step()
    assert_states_close(graph_state, snapshot_state(cuda_backend))


@pytest.mark.gpu
def test_torch_ops_and_physics_in_one_graph_without_host_sync(cuda_backend):
    n = cuda_backend.num_envs
    plan = cuda_backend.read_plan(bodies=("box",), sensors=("tip_pos",), contact_bodies=("box",))
    gen = torch.Generator(device="cuda")
    score = torch.zeros(n, device="cuda")
    spec = cuda_backend.reset_spec(("qpos", "qvel"))
    payload = spec.new_payload()

    def env_step():
        cuda_backend.ctrl.copy_(0.3 * torch.randn(n, 2, device="cuda", generator=gen))
        cuda_backend.step()
        score.add_(plan.body_pos_w[:, 0, 2] + plan.sensor("tip_pos")[:, 2] + plan.contact_force[:, 0, 2])
        done = plan.body_pos_w[:, 0, 2] < 0.2
        payload["qpos"][:, 2] = 0.45
        cuda_backend.reset(done, payload, spec)

    work = simcore.CapturedWork(
        env_step, backend=cuda_backend, name="env", steps_per_replay=2, generators=(gen,), require_graph=True
    )
    work.capture()
    start, score0 = snapshot_state(cuda_backend), score.clone()
    gen.manual_seed(123)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        work.replay()
        work.replay()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    graph_state, graph_score = snapshot_state(cuda_backend), score.clone()
    restore_state(cuda_backend, start)
    score.copy_(score0)
    gen.manual_seed(123)
    for _ in range(4):
        env_step()
    assert_states_close(graph_state, snapshot_state(cuda_backend))
    torch.testing.assert_close(graph_score, score, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_caller_owned_torch_graph_joins_backend_work(cuda_backend):
    cuda_backend.step()  # load kernels before capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream), cuda_backend.graph_capture_scope(stream):
        cuda_backend.step()
    before = cuda_backend.time.clone()
    graph.replay()
    torch.testing.assert_close(cuda_backend.time, before + cuda_backend.control_dt)


@pytest.mark.gpu
def test_g1_graph_replay_matches_eager(g1_model):
    n = 256
    backend = simcore.make_backend("mjwarp", g1_model, simcore.SimConfig(n, device="cuda"))
    qpos0 = torch.tensor(g1_default_qpos(g1_model), dtype=torch.float32, device="cuda")
    spec = backend.reset_spec(("qpos", "ctrl"))
    payload = spec.new_payload()
    payload["qpos"].copy_(qpos0.expand(n, -1))
    payload["ctrl"].copy_(qpos0[7:].expand(n, -1))
    backend.reset(torch.ones(n, dtype=torch.bool, device="cuda"), payload, spec)
    work = simcore.CapturedWork(
        backend.step, backend=backend, name="g1", steps_per_replay=4, require_graph=True
    )
    work.capture()
    start = snapshot_state(backend)
    work.replay()
    graph_state = snapshot_state(backend)
    restore_state(backend, start)
    for _ in range(4):
        backend.step()
    assert_states_close(graph_state, snapshot_state(backend))
    assert not backend.diagnostics().overflow_detected


def test_physics_benchmark_reports_rows_with_the_fallback_reason(g1_model):
    from simcore.bench import physics_benchmark

    rows = physics_benchmark(
        [2], [1, 2], backend="mjwarp", device="cpu", control_steps=2, warmup_control_steps=1, model=g1_model
    )
    assert [(r["mode"], r["steps_per_replay"]) for r in rows] == [("eager", 1), ("graph", 1), ("graph", 2)]
    for row in rows:
        assert row["num_envs"] == 2 and row["env_steps_per_sec"] > 0 and "contacts" in row["overflow"]
    assert rows[1]["eager_fallback_reason"] == "cpu device" and rows[1]["graph_enabled"] is False


@pytest.mark.gpu
@pytest.mark.parametrize("changes", [{"sensors_every_substep": True}, {"graph_conditional": False}])
def test_graph_step_with_a_cost_option_matches_the_default(small_model, changes, monkeypatch):
    """Sensors on every substep and the unrolled solver loop change only the cost: from one state, a graph
    replay of each reaches the default's state and sensors; sensors on every substep capture the acceleration
    pass once per substep, the default once per step."""
    from mujoco_warp._src import smooth

    captured_passes = []
    original = smooth.rne_postconstraint
    monkeypatch.setattr(
        smooth, "rne_postconstraint", lambda m, d: (captured_passes.append(1), original(m, d))
    )
    results = {}
    for name, extra in (("default", {}), ("variant", changes)):
        config = simcore.SimConfig(64, decimation=4, device="cuda", **extra)
        backend = simcore.make_backend("mjwarp", small_model, config)
        gen = torch.Generator(device="cuda").manual_seed(0)
        spec = backend.reset_spec(("qpos", "ctrl"))
        payload = spec.new_payload()
        # the box in the air: no contact, so the GPU solver has nothing to reorder between runs
        payload["qpos"][:, 2] = 0.5 + 0.3 * torch.rand(64, device="cuda", generator=gen)
        payload["ctrl"].uniform_(-1, 1, generator=gen)
        backend.reset(torch.ones(64, dtype=torch.bool, device="cuda"), payload, spec)
        work = simcore.CapturedWork(backend.step, backend=backend, name="physics", require_graph=True)
        captured_passes.clear()
        work.capture()
        passes = len(captured_passes)
        work.replay()
        results[name] = (snapshot_state(backend), backend._derived.sensordata.clone(), passes, backend)
    assert_states_close(results["default"][0], results["variant"][0])
    torch.testing.assert_close(results["default"][1], results["variant"][1], rtol=1e-4, atol=1e-3)
    if "sensors_every_substep" in changes:
        # the capture's eager warm-up steps count too: per step, 4 passes against 1
        assert results["variant"][2] == 4 * results["default"][2] > 0
    else:
        assert (
            results["default"][3].uses_conditional_nodes and not results["variant"][3].uses_conditional_nodes
        )


class _Cycle:
    """An object kept alive only by a reference cycle: freed when the cyclic collector runs."""

    def __init__(self, payload=None):
        self.me = self
        self.payload = payload


@pytest.mark.slow
def test_the_capture_guard_frees_cyclic_garbage_first_and_holds_the_collector_off():
    import gc
    import weakref

    garbage = weakref.ref(_Cycle())
    assert gc.isenabled() and garbage() is not None  # only the cyclic collector frees it
    with simcore.garbage_held_during_capture():
        assert garbage() is None  # collected on entry, before any capture begins
        assert not gc.isenabled()
        during = weakref.ref(_Cycle())
        for _ in range(3 * gc.get_threshold()[0]):  # allocations that would run the collector
            _Cycle()
        assert during() is not None
    assert gc.isenabled()
    with pytest.raises(ValueError), simcore.garbage_held_during_capture():
        raise ValueError("the capture failed")
    assert gc.isenabled()  # back on after a failure too
    gc.disable()
    try:
        with simcore.garbage_held_during_capture():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def _capture_with_warp_garbage(guard):
    """Capture ``target += 1`` with cyclic garbage holding a Warp device array present, collecting inside."""
    import gc

    import warp as wp

    wp.init()
    target = torch.zeros(8, device="cuda")
    _Cycle(wp.zeros(1 << 20, dtype=float, device="cuda:0"))  # cyclic garbage holding device memory
    graph = torch.cuda.CUDAGraph()
    with guard(), torch.cuda.graph(graph):
        target.add_(1.0)
        gc.collect()  # what the cyclic collector may do on its own during any capture
    return graph, target


@pytest.mark.gpu
def test_a_capture_in_the_guard_survives_warp_garbage_and_replays():
    graph, target = _capture_with_warp_garbage(simcore.garbage_held_during_capture)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert target.tolist() == [2.0] * 8  # captured once (the eager pass during capture does not run)


@pytest.mark.gpu
def test_without_the_guard_warp_garbage_collected_inside_a_capture_breaks_it():
    """What the guard is for (adr/0032), on this Warp: skipped, with the reason, once Warp frees safely."""
    try:
        _capture_with_warp_garbage(contextlib.nullcontext)
    except Exception as err:  # torch reports the invalidated capture when it ends
        assert "captur" in str(err), err
    else:
        pytest.skip(
            "this Warp frees an array safely inside a capture it did not start: the guard is optional"
        )
    finally:
        torch.cuda.synchronize()
