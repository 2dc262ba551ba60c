"""`FastDecoder`: a Transformer's decoding step (one new id per sample, a KV cache, eval mode) as the
functional ops straight on gathered tensors, which is what the step costs at batch 1, where each module
call, reshape and parameter lookup costs about as much as an op.

The logits are the general forward's, ``net(ids[:, None], cache=state)``, up to float rounding; the step
only lays its operands out for one-row products (`musictx.decoding.weights`). `reference_steps` turns the
fast path off for a block, so that a bench can time the general forward against it.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musictx.decoding.ops import StepKVCache, catch_up_attention, catch_up_one_sample, decode_attention, without_onednn
from musictx.decoding.weights import AttentionWeights, BlockWeights, NetWeights, net_weights
from musictx.models.transformer import DecoderCache, MusicTransformer, VanillaTransformer

_FAST = ContextVar("musictx_fast_decoding", default=True)


@contextmanager
def reference_steps() -> Iterator[None]:
    """Within the block, `fast_decoder` gives None: samplers step through the general forward."""
    token = _FAST.set(False)
    try:
        yield
    finally:
        _FAST.reset(token)


def fast_decoder(net: nn.Module) -> FastDecoder | None:
    """A `FastDecoder` for the Transformers of `musictx.models`, None for other nets (the LSTM) and inside
    `reference_steps`. It reads the parameters as they are now: make a new one after changing them. A net
    marked ``int8_steps`` (on a CPU) steps with int8 products."""
    if not _FAST.get() or not isinstance(net, (MusicTransformer, VanillaTransformer)):
        return None
    if net.int8_steps and not net.head.weight.is_cuda:
        try:
            return FastDecoder(net, int8=True)
        except RuntimeError as err:  # no int8 kernel for this CPU's quantized engine: the fp32 steps
            warnings.warn(f"int8 decoding steps unavailable here ({str(err).splitlines()[0]}); stepping in fp32",
                          stacklevel=2)
    return FastDecoder(net)


class FastDecoder:
    """Decoding steps of one Transformer in eval mode. Its caches (`init_cache`) take prompts through the
    net's general forward, ``net(window, cache=state)``, and then one id per step through `step`."""

    def __init__(self, net: nn.Module, int8: bool = False):
        """``int8``: the blocks' products in int8 (`musictx.decoding.weights.Int8Product`; CPU)."""
        self.net = net
        self.weights: NetWeights = net_weights(net, int8)
        # whether `step_catching_up` runs in one pass (relative attention; absolute positions step alone): read
        # between most draws (`musictx.decoding.window.SlidingWindow.steps_at`), so told once
        self.catches_up = self.weights.positions is None and self.weights.blocks[0].attn.table is not None

    def init_cache(self) -> DecoderCache:
        """An empty state whose layers keep the buffer layout that the steps read (`StepKVCache`)."""
        return self.net.init_cache(StepKVCache)

    @staticmethod
    def emptied(cache: DecoderCache) -> DecoderCache:
        """``cache`` emptied in place, its buffers kept: a cache that starts again (recall guidance's branch, every
        64 ids) then allocates and first-touches no memory. Nothing past a layer's length is ever read."""
        for layer in cache.layers:
            layer.n = 0
        return cache

    def step(self, ids: Tensor, cache: DecoderCache) -> Tensor:
        """Logits (B, V) after one new id per sample, ids (B,), fed to ``cache``."""
        self._check_room(cache)
        return self._rows(ids, [cache.length], [cache.layers])

    def step_together(self, ids: Tensor, caches: list[DecoderCache]) -> list[Tensor]:
        """The same new ids (B,) fed to each of several caches: the logits (B, V) after each. One pass: every
        matrix product runs on all the caches' rows at once, so a step reads the weights once rather than
        once a cache, and only attention runs per cache (recall guidance steps two caches with every id)."""
        for cache in caches:
            self._check_room(cache)
        logits = self._rows(ids.repeat(len(caches)), [c.length for c in caches], [c.layers for c in caches])
        return list(logits.view(len(caches), len(ids), -1).unbind(0))  # (B, V) each

    def step_many(self, ids: Tensor, cache: DecoderCache) -> Tensor:
        """Logits (B, V) after t new ids per sample, ids (B, t), fed to ``cache`` in one pass (ids that the
        sampler knew before the net ran: `musictx.decoding.sampling`). Needs `catches_up`."""
        return self._passes([ids], [cache])[0]

    def step_catching_up(self, ids: Tensor, cache: DecoderCache, other_ids: Tensor, other: DecoderCache
                         ) -> tuple[Tensor, Tensor]:
        """`step` of ``cache`` with the new ids (B,) (or `step_many`'s (B, t1)), and ``other`` fed several ids
        at once, other_ids (B, t) (a branch catching up on the ids it skipped), in one pass: the logits (B, V)
        after each. Needs `catches_up`."""
        mine, theirs = self._passes([ids.view(ids.shape[0], -1), other_ids], [cache, other])
        return mine, theirs

    def _passes(self, groups: list[Tensor], caches: list[DecoderCache]) -> list[Tensor]:
        """Group i's ids (B, t_i) fed to ``caches[i]``, every group in one pass: the logits (B, V) after each
        group's last ids. Its rows are the groups in turn, each sample-major (sample b's t_i ids together)."""
        B, ts = groups[0].shape[0], [g.shape[1] for g in groups]  # shapes, not len(): Tensor.__len__ is Python
        for cache, t in zip(caches, ts, strict=True):
            self._check_room(cache, t)
        w = self.weights
        with without_onednn(w.emb.dtype == torch.float32):
            x = w.emb.index_select(0, torch.cat([g.reshape(-1) for g in groups]))  # (B * sum(ts), d_model)
            attention = partial(_attention_in_groups, B=B, ts=ts)
            *blocks, last_block = zip(w.blocks, *[c.layers for c in caches], strict=True)
            for block, *layers in blocks:
                x = block_step(x, layers, block, attention)
            # the last block: every id's key and value cached, but only each group's last ids go on to the logits
            x = block_step(x, last_block[1:], last_block[0], partial(attention, last_only=True),
                           partial(_last_rows, B=B, ts=ts))  # (n * B, d_model)
            logits = torch.mm(torch.layer_norm(x, w.ln_shape, w.ln_w, w.ln_b, w.ln_eps), w.head_t)
        return list(logits.split_with_sizes([B] * len(ts)))  # the op itself: Tensor.split's Python costs more

    def _check_room(self, cache: DecoderCache, new: int = 1) -> None:
        if cache.length + new > self.net.max_seq_len:
            raise ValueError(f"{cache.length} cached + {new} new tokens exceed max_seq_len={self.net.max_seq_len}")

    def _rows(self, ids: Tensor, starts: list[int], layer_caches: list[list[StepKVCache]]) -> Tensor:
        """Logits (n * B, V) of ids (n * B,): the B rows of cache i in turn, at its position ``starts[i]``,
        each cache given by its layers' KV caches ``layer_caches[i]``."""
        w = self.weights
        # oneDNN off in fp32 steps (see `without_onednn`); lower precisions keep it: ATen's own bf16
        # matmuls are slow
        with without_onednn(w.emb.dtype == torch.float32):
            x = w.emb.index_select(0, ids)  # (n * B, d_model)
            if w.positions is not None:
                x = x + _positions_at(w.positions, starts, len(x))
            for block, *layers in zip(w.blocks, *layer_caches, strict=True):
                x = block_step(x, layers, block)
            return torch.mm(torch.layer_norm(x, w.ln_shape, w.ln_w, w.ln_b, w.ln_eps), w.head_t)  # (n * B, V)


def _positions_at(table: Tensor, starts: list[int], rows: int) -> Tensor:
    """The absolute positions of one new token per row: row r of cache i is at ``starts[i]``."""
    if len(starts) == 1:
        return table[starts[0]]  # (d_model,), broadcast over the rows
    at = torch.tensor(starts, device=table.device).repeat_interleave(rows // len(starts))  # (n * B,)
    return table[at]


def block_step(x: Tensor, caches: list[StepKVCache], w: BlockWeights, attention=None, going_on=None) -> Tensor:
    """`Block.forward` of one token per sample and cache in eval mode (no dropout), x (n * B, d_model) the
    rows of the n ``caches`` in turn (``attention``: `attention_step` unless the rows are laid out otherwise;
    ``going_on``: which of x's rows the attention's output stands for, where it keeps fewer: a pass's last block)."""
    shape = x.shape[-1:]
    # torch.layer_norm: the op itself, without F.layer_norm's Python checks, which cost as much at batch 1
    attended = (attention or attention_step)(torch.layer_norm(x, shape, w.ln1_w, w.ln1_b, w.ln1_eps), caches, w.attn)
    x = attended.add_(x if going_on is None else going_on(x))
    h = F.gelu(_product(torch.layer_norm(x, shape, w.ln2_w, w.ln2_b, w.ln2_eps), w.fc1_wt, w.fc1_b, w.fc1_int8))
    return _product(h, w.fc2_wt, w.fc2_b, w.fc2_int8).add_(x)  # (., d_model)


def _product(x: Tensor, wt: Tensor, b: Tensor, int8) -> Tensor:
    """x @ wt + b, or the same product in int8 where the weights have one (`Int8Product`)."""
    return torch.addmm(b, x, wt) if int8 is None else int8(x)


def attention_step(x: Tensor, caches: list[StepKVCache], w: AttentionWeights) -> Tensor:
    """An attention layer's forward for one new token per cache, x (n * B, d_model) -> (n * B, d_model). The
    projections run on all rows at once; each cache attends over its own keys."""
    qkv = _product(x, w.qkv_wt, w.qkv_b, w.qkv_int8)  # (n * B, 3 * H * D)
    if len(caches) == 1:
        out = _attend_step(qkv, caches[0], w)  # (B, H * D)
    else:
        b = len(x) // len(caches)  # rows per cache
        out = torch.cat([_attend_step(rows, cache, w) for rows, cache in zip(qkv.split(b), caches, strict=True)])
    return _product(out, w.proj_wt, w.proj_b, w.proj_int8)


def _attention_in_groups(x: Tensor, caches: list[StepKVCache], w: AttentionWeights, B: int, ts: list[int],
                         last_only: bool = False) -> Tensor:
    """`attention_step` of `FastDecoder._passes`'s rows: B * ts[i] rows for ``caches[i]`` in turn, t new ids
    per sample (one id: `_attend_step`; several: `catch_up_attention`, each seeing the keys up to its own).
    ``last_only``: every row's key and value is cached, but only each sample's last id of each group attends
    -> (B * len(ts), d_model) (the pass's last block, whose other rows lead to no logits)."""
    qkv = _product(x, w.qkv_wt, w.qkv_b, w.qkv_int8)  # (B * sum(ts), 3 * H * D)
    out = [_attend_group(rows, cache, w, B, t, last_only)
           for rows, cache, t in zip(qkv.split_with_sizes([B * t for t in ts]), caches, ts, strict=True)]
    return _product(torch.cat(out) if len(out) > 1 else out[0], w.proj_wt, w.proj_b, w.proj_int8)


def _attend_group(rows: Tensor, cache: StepKVCache, w: AttentionWeights, B: int, t: int, last_only: bool) -> Tensor:
    """One group's t new ids per sample, their projections ``rows`` (B * t, 3 * H * D), into ``cache``: the
    attention of each (B * t, H * D), or of each sample's last only (B, H * D)."""
    H, D = w.n_heads, w.d_head
    if t == 1:
        return _attend_step(rows, cache, w)
    if B == 1:  # the projections viewed heads first: (3, H, t, D)
        q_k_v = rows.view(t, 3, H, D).permute(1, 2, 0, 3)
        if not last_only:
            return catch_up_one_sample(q_k_v, cache, w.table)
        cache.push_pair(q_k_v[1:])
        return decode_attention(q_k_v[0].narrow(1, t - 1, 1), cache, w.table)  # (1, H * D)
    q, k_new, v_new = rows.view(B, t, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, t, D) each
    cache.append(k_new, v_new)  # KVCache's own append: several entries at once
    if last_only:
        return decode_attention(q[:, :, -1].transpose(0, 1), cache, w.table)  # (B, H * D)
    return catch_up_attention(q, cache, w.table).view(B * t, H * D)


def _last_rows(x: Tensor, B: int, ts: list[int]) -> Tensor:
    """Each group's last row per sample of the pass's rows x (B * sum(ts), d) -> (B * len(ts), d), in the order of
    the logits."""
    if B == 1 and len(ts) == 2:  # one strided view, no copy: rows ts[0] - 1 and ts[0] + ts[1] - 1
        return x[ts[0] - 1 :: ts[1]]
    starts = itertools.accumulate([0, *(B * t for t in ts[:-1])])  # each group's first row
    return torch.cat([x[at + t - 1 : at + B * t : t] for at, t in zip(starts, ts, strict=True)])


def _attend_step(qkv: Tensor, cache: StepKVCache, w: AttentionWeights) -> Tensor:
    """Append the new keys and values of ``qkv`` (B, 3 * H * D) to the cache; attend its queries -> (B, H * D)."""
    B, H, D = qkv.shape[0], w.n_heads, w.d_head
    if w.table is not None and B == 1:
        # viewed as (3, H, 1, D), the queries are already heads first, and the keys and values go in with one copy
        q_k_v = qkv.view(3, H, 1, D)
        cache.push_pair(q_k_v[1:])
        return decode_attention(q_k_v[0], cache, w.table)
    q, k_new, v_new = qkv.view(B, 3, H, D).unbind(1)  # (B, H, D) each
    if w.table is not None:
        cache.push_one(k_new, v_new)
        return decode_attention(q.transpose(0, 1), cache, w.table)
    k, v = cache.append(k_new[:, :, None], v_new[:, :, None])  # (B, H, Tk, D) each
    return w.layer.attend(q[:, :, None], k, v).reshape(B, H * D)  # the layer's own one-query kernel
