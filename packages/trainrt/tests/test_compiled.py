"""CompiledOnFirstCall: compiled where torch.compile can, eager with a recorded reason where it cannot."""

import torch

from trainrt.compiled import CompiledOnFirstCall, compile_refusal, joined_reasons


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_later_call_that_cannot_compile_again_runs_eagerly_and_says_why():
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=1):
        _past_the_limit()
    torch._dynamo.reset()


def _past_the_limit() -> None:
    part = CompiledOnFirstCall(_double)
    assert part(torch.ones(2)).tolist() == [2.0, 2.0]  # eager until compile()
    assert part.fallback_reason == "not requested"
    assert part.compile()
    x = torch.arange(3.0)
    assert torch.equal(part(x), x * 2)  # compiled at its first call
    assert part.compiled and part.fallback_reason == ""
    y = torch.arange(5.0)  # a new shape needs a second compilation, past the limit of one
    assert torch.equal(part(y), y * 2)
    assert not part.compiled
    assert part.fallback_reason.startswith("recompiling failed: FailOnRecompileLimitHit")
    assert torch.equal(part(x), x * 2)  # and stays eager


def test_reasons_join_into_one_line():
    assert joined_reasons({}, parts=2) == ""
    assert joined_reasons({"a": "cpu device", "b": "cpu device"}, parts=2) == "cpu device"
    assert joined_reasons({"a": "cpu device"}, parts=2) == "a: cpu device"
    assert joined_reasons({"a": "x", "b": "y"}, parts=2) == "a: x; b: y"


def test_parts_compile_only_when_asked_and_on_cuda():
    assert compile_refusal(False, torch.device("cuda")) == "not requested"
    assert compile_refusal(False, torch.device("cpu")) == "not requested"
    assert compile_refusal(True, torch.device("cpu")) == "cpu device"
    assert compile_refusal(True, torch.device("cuda")) is None
