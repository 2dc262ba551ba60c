"""The KV cache of one attention layer: keys and values of every token fed so far, grown in place.

During generation each step feeds one token. Copying the whole cache every step (``torch.cat``) would
cost more than the step itself at long contexts, so the cache writes into buffers that grow by doubling
(or are allocated at ``capacity`` at once, e.g. the model's context).
"""

from __future__ import annotations

from torch import Tensor


class KVCache:
    """Keys and values of every token fed so far to one attention layer.

    Positions are counted from the first cached token: a fresh cache fed the last L-k tokens of a piece
    gives those tokens the same relative distances as before, which is what sliding-window generation
    needs. `append` mutates the cache in place; ``capacity`` is allocated on the first append so that
    later appends never reallocate.
    """

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity
        self._k: Tensor | None = None  # (B, H, allocated, D)
        self._v: Tensor | None = None
        self.n = 0

    @property
    def length(self) -> int:
        return self.n

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, :, : self.n]  # (B, H, n, D) view

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, :, : self.n]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new keys/values (B, H, t_new, D); return all cached keys and values (views)."""
        need = self.n + k.shape[2]
        if self._k is None or need > self._k.shape[2]:
            self._grow(k, need)
        self._k[:, :, self.n : need] = k
        self._v[:, :, self.n : need] = v
        self.n = need
        return self.k, self.v

    def _grow(self, like: Tensor, need: int) -> None:
        """New buffers with room for at least ``need`` tokens, shaped like ``like`` (B, H, ., D), holding
        what is cached so far."""
        allocated = 0 if self._k is None else self._k.shape[2]
        size = max(need, self.capacity or 0, 2 * allocated, 16)
        k, v = self._allocate(like, size)
        if self.n:
            k[:, :, : self.n], v[:, :, : self.n] = self.k, self.v
        self._k, self._v = k, v

    def _allocate(self, like: Tensor, size: int) -> tuple[Tensor, Tensor]:
        """Empty key and value buffers (B, H, size, D); a subclass may lay them out otherwise."""
        B, H, _, D = like.shape
        return like.new_empty(B, H, size, D), like.new_empty(B, H, size, D)
