"""The memory budget measured on one device: model state, activations per block (with and without
checkpointing), the largest batch that fits, and the allocator's fragmentation.

    rows = memory_rows(mc, torch.device("cuda", 0))      # the memory stage's run(), in its own process

On CUDA every figure is the caching allocator's: memory_allocated() before and after each phase,
max_memory_allocated() for peaks, memory_stats() for reserved vs allocated. On CPU, where no allocator keeps
books, torch's MemTracker (torch.distributed._tools.mem_tracker) counts parameters, gradients, optimizer state
and activations by category; the batch search runs under suite/stages/memory/search.py's CpuCap. Training is
bf16 autocast over fp32 parameters with AdamW (the state suite/costmodel/memory_formula.py prices at 16Ψ).
Activations per block are the difference between a 2-block and a 1-block model: embedding, head and loss
cancel.
"""

from __future__ import annotations

import gc

import torch
from torch.utils.checkpoint import checkpoint

from suite.config import GptConfig
from suite.costmodel.sizing import parameter_count
from suite.results import Row
from suite.stages.memory.search import CpuCap, CudaMeter, largest_batch, predicted_largest
from suite.workloads.gpt import build_model, loss_fn, synthetic_batch

STAGE = "memory"


def forward_loss(model, tokens, targets, checkpointed: bool = False):
    """The GPT's forward under bf16 autocast, each block optionally under torch.utils.checkpoint."""
    with torch.autocast(tokens.device.type, dtype=torch.bfloat16):
        x = model.embed(tokens)
        for block in model.blocks:
            x = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
        return loss_fn(model.head(model.norm(x)), targets)


def _row(case, metric, value, **kw) -> Row:
    return Row(stage=STAGE, case=case, metric=metric, value=float(value), unit=kw.pop("unit", "bytes"), **kw)


class Phases:
    """Live bytes by phase: MemTracker's categories on CPU, memory_allocated() deltas on CUDA."""

    def __init__(self, device: torch.device):
        self.device = device

    def state(self, cfg: GptConfig) -> dict[str, int]:
        if self.device.type == "cuda":
            return self._cuda_state(cfg)
        from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType

        model = build_model(cfg)
        opt = torch.optim.AdamW(model.parameters())
        tracker = MemTracker()
        tracker.track_external(model, opt)
        tokens, targets = synthetic_batch(cfg, 0)
        with tracker:
            forward_loss(model, tokens, targets).backward()
            opt.step()
            snap = tracker.get_tracker_snapshot("current")[torch.device("cpu")]
        return {
            "parameters": snap[_MemRefType.PARAM],
            "gradients": snap[_MemRefType.GRAD],
            "optimizer": snap[_MemRefType.OPT],
        }

    def _cuda_state(self, cfg: GptConfig) -> dict[str, int]:
        d = self.device
        warm_up(self.device)
        start = torch.cuda.memory_allocated(d)
        model = build_model(cfg, d)
        params = torch.cuda.memory_allocated(d) - start
        tokens, targets = synthetic_batch(cfg, 0, batch=1, device=d)
        forward_loss(model, tokens, targets).backward()
        grads = torch.cuda.memory_allocated(d) - start - params
        opt = torch.optim.AdamW(model.parameters())
        opt.step()
        torch.cuda.synchronize(d)
        optimizer = torch.cuda.memory_allocated(d) - start - params - grads
        del model, opt
        release(d)
        return {"parameters": params, "gradients": grads, "optimizer": optimizer}

    def saved_activations(self, cfg: GptConfig, checkpointed: bool) -> int:
        """Bytes kept for backward after the forward of `cfg`'s model."""
        model = build_model(cfg, self.device)
        tokens, targets = synthetic_batch(cfg, 0, device=self.device)
        if self.device.type == "cuda":
            forward_loss(model, tokens, targets, checkpointed).backward()  # warm: workspaces, autotuning
            model.zero_grad(set_to_none=False)
            release(self.device)
            before = torch.cuda.memory_allocated(self.device)
            loss = forward_loss(model, tokens, targets, checkpointed)
            saved = torch.cuda.memory_allocated(self.device) - before
            loss.backward()
            del loss, model
            release(self.device)
            return saved
        from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType

        tracker = MemTracker()
        tracker.track_external(model)
        with tracker:
            loss = forward_loss(model, tokens, targets, checkpointed)
            saved = tracker.get_tracker_snapshot("current")[torch.device("cpu")][_MemRefType.ACT]
            loss.backward()
        return saved


def warm_up(device: torch.device) -> None:
    """One throwaway step on a tiny model: cuBLAS workspaces and handles (one per thread: forward and the
    autograd thread) are allocated now, not inside a measured phase."""
    tiny = GptConfig(vocab=64, hidden=64, layers=1, heads=4, seq_len=64, batch=2)
    model = build_model(tiny, device)
    forward_loss(model, *synthetic_batch(tiny, 0, device=device)).backward()
    del model
    release(device)


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def activation_rows(mc, device: torch.device) -> list[Row]:
    phases, out = Phases(device), []
    for checkpointed, case in ((False, "activations"), (True, "activations.checkpoint")):
        one = phases.saved_activations(mc.model(layers=1), checkpointed)
        two = phases.saved_activations(mc.model(layers=2), checkpointed)
        out.append(_row(case, "bytes_per_layer", two - one, count=mc.seq_len * mc.batch))
    return out


def search_rows(mc, device: torch.device, step_hook=None) -> list[Row]:
    """The largest batch of the search model that fits under the budget; `step_hook(activations)` is the test
    seam that can keep a tensor from a failed step (a leak the search must catch)."""
    cfg = mc.model(layers=mc.search_layers)
    meter = CudaMeter(device, int(mc.budget_gib * 2**30) or None) if device.type == "cuda" else CpuCap()
    with meter:  # on CPU the cap mode counts from before the model exists
        model = build_model(cfg, device)
        opt = torch.optim.AdamW(model.parameters())

        def step(batch: int) -> None:
            tokens, targets = synthetic_batch(cfg, 0, batch=batch, device=device)
            loss = forward_loss(model, tokens, targets)
            if step_hook is not None:
                step_hook(loss)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)

        step(1)  # the optimizer state and the gradients exist before the baseline
        opt.zero_grad(set_to_none=False)
        release(device)
        baseline = meter.allocated()
        if device.type == "cpu":
            meter.cap_bytes = baseline + mc.cpu_headroom_bytes
        result = largest_batch(step, meter, mc.search_max_batch)
        cap = meter.cap_bytes
    peaks = {t.batch: t.peak_bytes for t in result.tries if t.fits}
    predicted = predicted_largest(peaks, cap - baseline)
    out = [_row("search", "try_peak_bytes", t.peak_bytes, count=t.batch) for t in result.tries]
    out += [_row("search", "try_fits", float(t.fits), unit="count", count=t.batch) for t in result.tries]
    out += [_row("search", "try_leaked_bytes", t.leaked_bytes, count=t.batch) for t in result.tries]
    out += [
        _row("search", "largest_batch", result.largest_fit, unit="count"),
        _row(
            "search",
            "smallest_oom",
            result.smallest_oom if result.smallest_oom else float("nan"),
            unit="count",
        ),
        _row("search", "predicted_batch", predicted if predicted is not None else float("nan"), unit="count"),
        _row("search", "cap_bytes", cap),
        _row("search", "baseline_bytes", baseline),
    ]
    if device.type == "cuda":
        out += fragmentation_rows(device)
    del model, opt
    release(device)
    return out


def fragmentation_rows(device: torch.device) -> list[Row]:
    """Reserved vs allocated, at the search's peak and now, and the inactive split blocks (fragments)."""
    stats = torch.cuda.memory_stats(device)
    rows = [
        _row("fragmentation", key.replace(".all.", "_"), stats.get(key, 0))
        for key in (
            "reserved_bytes.all.peak",
            "allocated_bytes.all.peak",
            "reserved_bytes.all.current",
            "allocated_bytes.all.current",
            "inactive_split_bytes.all.current",
        )
    ]
    torch.cuda.empty_cache()
    rows.append(_row("fragmentation", "reserved_after_empty_cache", torch.cuda.memory_reserved(device)))
    return rows


def memory_rows(mc, device: torch.device, say=lambda message: None) -> list[Row]:
    say("model state: parameters, gradients, AdamW moments")
    state = Phases(device).state(mc.model(layers=mc.search_layers))
    params = parameter_count(mc.model(layers=mc.search_layers))
    rows = [_row("state", part, value, count=params) for part, value in state.items()]
    say("activations per block, with and without checkpointing")
    rows += activation_rows(mc, device)
    say("largest batch that fits")
    rows += search_rows(mc, device)
    return rows
