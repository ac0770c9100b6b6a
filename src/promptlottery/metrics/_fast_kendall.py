"""Kendall's tau on many bootstrap resamples of the same paired data, without re-sorting each one.

A resample drawn with replacement only repeats original items, so with ``w_r[i]`` the number of
copies of item ``i`` in resample ``r`` and ``S[i, j] = sign(x_i - x_j) * sign(y_i - y_j)``::

    concordant - discordant = (w_r^T S w_r) / 2

(copies of one item are tied in both variables: ``S[i, i] = 0``), and the tie corrections of tau-b
(or the class count of tau-c) follow from the per-value totals of ``w_r``. This is what
``scipy.stats.kendalltau(x[idx], y[idx])`` computes, with the same final floating-point formula.

``w^T S w`` costs O(n^2) per resample done directly. Here the items are cut into blocks of
consecutive x-values and, separately, blocks of consecutive y-values (a run of tied values is never
split), and the pairs are split three ways:

* pairs in the same x-block: a small dense ``W_block @ S_block`` product per block;
* pairs in the same y-block but different x-blocks: the same, on the y-blocks;
* all other pairs: their signs are those of the block indices, so their sum is a 2-D prefix sum
  (a dominance count) over the grid of per-(x-block, y-block) weight totals.

A block holding one value only (a run of ties) has no pairs to compute, so data with few distinct
values (Likert scores) costs little more than the grid. Block sizes are picked from a rough cost
model. All intermediate values are integers below 2**24 (for ``n <= 8192``; larger inputs take the
float64 route) so the float32 products are exact; every reduction is float64.
"""

from __future__ import annotations

import numpy as np

_F32_EXACT = 2**24  # float32 holds every integer below this exactly
_F32_SAFE_N = 8192  # w_i * |(S w)_i| <= n^2 / 4 < 2**24 for n <= 8192
_CANDIDATES = (1, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# rough single-core cost per 1000 resamples, in microseconds, of one unit of each kind of work
_C_MAC = 0.03  # one multiply-add per resample in a block product
_C_CALL = 10.0  # one BLAS call and its slicing
_C_CELL = 4.0  # one cell of the block grid (prefix sums and reduction)
_C_PASS = 1.5  # one item in one elementwise pass over the weights (take, product, reduction)
_C_COUNT = 4.0  # one item in counting the resample draws (gather + bincount)


def _blocks(counts: np.ndarray, target: int) -> np.ndarray:
    """Block id per distinct value (in value order): consecutive values grouped by about ``target``
    items; a value with at least ``target / 2`` items is a block of its own. Ties are never split."""
    before = np.cumsum(counts) - counts
    big = counts >= max(1, target // 2)
    cut = np.ones(len(counts), dtype=bool)
    cut[1:] = big[1:] | big[:-1] | (before[1:] // target != before[:-1] // target)
    return np.cumsum(cut) - 1


def _block_stats(counts: np.ndarray, block: np.ndarray) -> tuple[int, float, int]:
    """(number of blocks, sum of squared sizes of multi-value blocks, number of multi-value blocks)."""
    k = int(block[-1]) + 1
    sizes = np.bincount(block, weights=counts, minlength=k)
    multi = np.bincount(block, minlength=k) > 1
    return k, float((sizes[multi] ** 2).sum()), int(multi.sum())


def _cost(m: int, x: tuple[int, float, int], y: tuple[int, float, int], x_ties: bool, y_ties: bool) -> float:
    """Rough cost of one blocking (per 1000 resamples, microseconds); see the module docstring."""
    (kx, sqx, nx), (ky, sqy, ny) = x, y
    if nx == 0 and ny == 0:  # every block one value: only the grid of value pairs
        return _C_COUNT * m + _C_CELL * kx * ky
    cost = _C_COUNT * m + _C_CELL * kx * ky
    cost += min(_C_MAC * m * ky + _C_CALL * kx, _C_COUNT * m)  # weight totals on the grid
    if nx:
        cost += _C_MAC * sqx + _C_CALL * nx + _C_PASS * m
        cost += 2 * _C_PASS * m if x_ties else 0.0  # copies per distinct x value
    if ny or y_ties:
        cost += 2 * _C_PASS * m  # weights in y order
    if ny:
        cost += _C_MAC * sqy + _C_CALL * ny + _C_PASS * m
        cost += 2 * _C_PASS * m if y_ties else 0.0
    return cost


def _choose_blocks(cnt_x: np.ndarray, cnt_y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    opts_x = [_blocks(cnt_x, t) for t in _CANDIDATES]
    opts_y = [_blocks(cnt_y, t) for t in _CANDIDATES]
    stats_x = [_block_stats(cnt_x, b) for b in opts_x]
    stats_y = [_block_stats(cnt_y, b) for b in opts_y]
    x_ties, y_ties = bool((cnt_x > 1).any()), bool((cnt_y > 1).any())
    costs = [[_cost(m, sx, sy, x_ties, y_ties) for sy in stats_y] for sx in stats_x]
    i, j = np.unravel_index(np.argmin(costs), (len(opts_x), len(opts_y)))
    return opts_x[i], opts_y[j]


class _Plan:
    """Everything about the data that does not depend on the resample."""

    def __init__(self, x: np.ndarray, y: np.ndarray, block_size: int | None):
        n = len(x)
        vi = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
        m = len(vi)
        self.n, self.m = n, m
        if m == 0:
            return
        _, cx = np.unique(x[vi], return_inverse=True)
        _, cy = np.unique(y[vi], return_inverse=True)
        cx, cy = cx.ravel(), cy.ravel()
        ox = np.lexsort((cy, cx))  # valid positions sorted by x then y
        oy = np.lexsort((cx, cy))
        # original item -> column of the x-ordered weight matrix (m: dropped, a NaN pair)
        self.col_x = np.full(n, m, dtype=np.intp)
        self.col_x[vi[ox]] = np.arange(m)
        inv_ox = np.empty(m, dtype=np.intp)
        inv_ox[ox] = np.arange(m)
        self.y_from_x = inv_ox[oy]  # y-ordered column -> x-ordered column

        cnt_x, cnt_y = np.bincount(cx), np.bincount(cy)
        self.x_values, self.y_values = _ValueRuns(cnt_x), _ValueRuns(cnt_y)
        if block_size is None:
            bx_code, by_code = _choose_blocks(cnt_x, cnt_y, m)
        else:
            bx_code, by_code = _blocks(cnt_x, block_size), _blocks(cnt_y, block_size)
        bx, by = bx_code[cx], by_code[cy]
        self.kx, self.ky = int(bx_code[-1]) + 1, int(by_code[-1]) + 1
        # a block holding a single value has no pair with a nonzero sign inside it
        multi_x = np.bincount(bx_code, minlength=self.kx) > 1
        multi_y = np.bincount(by_code, minlength=self.ky) > 1
        self.x_single, self.y_single = not multi_x.any(), not multi_y.any()
        self.grid_only = self.x_single and self.y_single
        # grid cell of each original item (kx * ky: dropped), for counting the draws per cell
        self.cell = np.full(n, self.kx * self.ky, dtype=np.intp)
        self.cell[vi] = bx * self.ky + by
        self.grid_by_count = self.grid_only or _C_MAC * m * self.ky + _C_CALL * self.kx > _C_COUNT * m
        if self.grid_only:
            return

        x_spans = np.searchsorted(bx[ox], np.arange(self.kx + 1))
        y_spans = np.searchsorted(by[oy], np.arange(self.ky + 1))

        def sign_matrix(items: np.ndarray, mask_same_xblock: bool) -> np.ndarray | None:
            s = np.sign(cx[items][:, None] - cx[items][None, :])
            s *= np.sign(cy[items][:, None] - cy[items][None, :])
            if mask_same_xblock:
                s[bx[items][:, None] == bx[items][None, :]] = 0
            return s.astype(np.float32) if s.any() else None

        # pairs in the same x-block / in the same y-block but different x-blocks
        self.a_blocks = _dense_blocks(x_spans, ox, multi_x, lambda it: sign_matrix(it, False))
        self.b_blocks = _dense_blocks(y_spans, oy, multi_y, lambda it: sign_matrix(it, True))
        # per x-block, the one-hot y-block of each column: weight totals on the block grid
        by_x = by[ox]
        self.grid_onehot = []
        for p in range(0 if self.grid_by_count else self.kx):
            s, e = int(x_spans[p]), int(x_spans[p + 1])
            oh_t = np.zeros((self.ky, e - s), dtype=np.float32)
            oh_t[by_x[s:e], np.arange(e - s)] = 1.0
            self.grid_onehot.append((s, e, oh_t))


def _dense_blocks(spans: np.ndarray, order: np.ndarray, multi: np.ndarray, make) -> list:
    out = []
    for p in np.flatnonzero(multi):
        s, e = int(spans[p]), int(spans[p + 1])
        mat = make(order[s:e])
        if mat is not None:
            out.append((s, e, mat))
    return out


def kendall_tau_resampled(
    x: np.ndarray,
    y: np.ndarray,
    indices: np.ndarray,
    *,
    variant: str = "b",
    block_size: int | None = None,
    max_chunk_elements: int = 2**23,
) -> np.ndarray:
    """``[kendalltau(x[idx], y[idx], variant=variant) for idx in indices]``, NaN pairs dropped, fast.

    ``x``, ``y``: float arrays of length n; ``indices``: an (R, n') matrix of item indices in
    ``[0, n)``. Undefined resamples (a constant variable, fewer than two pairs) give nan.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    indices = np.asarray(indices)
    if indices.ndim != 2:
        raise ValueError(f"indices must be a 2-D (n_resamples, n) array, got shape {indices.shape}")
    n_res, width = indices.shape
    if width >= _F32_EXACT:
        raise ValueError(f"resamples of {width} draws are too long for exact float32 counts (max 2**24 - 1)")
    plan = _Plan(x, y, block_size)
    if plan.m == 0:
        return np.full(n_res, np.nan)
    exact32 = width <= _F32_SAFE_N
    per_row = max(plan.kx * plan.ky, 1) if plan.grid_only else max(plan.m, plan.kx * plan.ky, 1)
    chunk = int(max(1, min(n_res, max_chunk_elements // per_row)))
    out = np.empty(n_res, dtype=np.float64)
    for start in range(0, n_res, chunk):
        stop = min(n_res, start + chunk)
        out[start:stop] = _chunk(plan, indices[start:stop], variant, exact32)
    return out


def _bincount_rows(codes: np.ndarray, idx: np.ndarray, n_bins: int) -> np.ndarray:
    """Per row of ``idx``: how many of its entries fall in each bin ``codes[entry]`` (float32);
    bin ``n_bins`` collects the dropped entries and is cut off."""
    rc = idx.shape[0]
    out = np.empty((rc, n_bins), dtype=np.float32)
    step = max(1, 2**16 // (n_bins + 1))  # a few rows at a time keeps the counts in cache
    offsets = np.arange(step, dtype=np.intp)[:, None] * (n_bins + 1)
    for s in range(0, rc, step):
        e = min(rc, s + step)
        flat = codes[idx[s:e]]
        flat += offsets[: e - s]
        counts = np.bincount(flat.ravel(), minlength=(e - s) * (n_bins + 1))
        out[s:e] = counts.reshape(e - s, n_bins + 1)[:, :n_bins]
    return out


def _rowdot(a: np.ndarray, b: np.ndarray, exact32: bool) -> np.ndarray:
    """Row-wise dot products of two integer-valued float32 matrices, accumulated in float64."""
    if exact32:
        prod = a * b  # exact: every product here is at most n^2 / 4 < 2**24
        return prod.sum(axis=1, dtype=np.float64)
    return np.einsum("rk,rk->r", a.astype(np.float64), b.astype(np.float64))


def _coldot(a: np.ndarray, b: np.ndarray, exact32: bool) -> np.ndarray:
    """Column-wise dot products of two integer-valued float32 matrices, accumulated in float64."""
    if exact32:
        return (a * b).sum(axis=0, dtype=np.float64)  # products exact: at most n^2 / 4 < 2**24
    return (a.astype(np.float64) * b.astype(np.float64)).sum(axis=0)


def _quad_blocks(w: np.ndarray, blocks: list, buf: np.ndarray, exact32: bool) -> np.ndarray:
    """sum over blocks of w_block^T S_block w_block, per row of w."""
    if not blocks:
        return np.zeros(w.shape[0])
    buf.fill(0.0)
    for s, e, mat in blocks:
        np.matmul(w[:, s:e], mat, out=buf[:, s:e])
    return _rowdot(buf, w, exact32)


class _ValueRuns:
    """Where the runs of equal values lie among the value-sorted columns, arranged for summing the
    copies per value: short runs by shifted column slices, long runs by segment sums."""

    _LONG = 16

    def __init__(self, counts: np.ndarray, allow_sparse: bool = True):
        first = np.cumsum(counts) - counts
        self.no_ties = bool((counts == 1).all())
        # few tied items: square the per-item copies, then correct on the tied columns only
        tied = counts > 1
        self.sparse: _ValueRuns | None = None
        if allow_sparse and 0 < 8 * int(counts[tied].sum()) < int(counts.sum()):
            starts = np.repeat(first[tied], counts[tied])
            self.tied_cols = (
                starts
                + np.arange(len(starts))
                - np.repeat(np.cumsum(counts[tied]) - counts[tied], counts[tied])
            )
            self.sparse = _ValueRuns(counts[tied], allow_sparse=False)
        short = counts <= self._LONG
        # short runs, longest first: the runs longer than j are a prefix, so the j-th items of all
        # of them are one slice of columns  first[order[:k_j]] + j
        order = np.argsort(-counts[short], kind="stable")
        s_first, s_len = first[short][order], counts[short][order]
        self.short_cols = [s_first[: int((s_len > j).sum())] + j for j in range(int(s_len.max(initial=0)))]
        # long runs: [start, end) pairs for reduceat; the odd segments (between runs) are dropped
        bounds = np.stack([first[~short], first[~short] + counts[~short]], axis=1).ravel()
        self.long_bounds = bounds[bounds < counts.sum()]
        self.n_long = int((~short).sum())


def _value_stats(w: np.ndarray, runs: _ValueRuns, need_classes: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Per resample (row of ``w``, value-sorted columns): the sum over distinct values of
    (copies of the value)^2, and, if asked, how many distinct values occur. Sums are exact: <= n."""
    if runs.no_ties:
        return _sum_sq(w, 1), (np.count_nonzero(w, axis=1) if need_classes else None)
    if runs.sparse is not None:
        sq, classes = _value_stats(w, _NO_TIES, need_classes)
        wt = np.take(w, runs.tied_cols, axis=1)
        sq_t, cls_t = _value_stats(wt, runs.sparse, need_classes)
        sq += sq_t - _sum_sq(wt, 1)
        if need_classes:
            classes += cls_t - np.count_nonzero(wt, axis=1)
        return sq, classes
    sq = np.zeros(w.shape[0])
    classes = np.zeros(w.shape[0], dtype=np.int64) if need_classes else None
    parts = []
    if runs.short_cols:
        per = np.take(w, runs.short_cols[0], axis=1)
        for cols in runs.short_cols[1:]:
            per[:, : len(cols)] += np.take(w, cols, axis=1)
        parts.append(per)
    if runs.n_long:
        parts.append(np.add.reduceat(w, runs.long_bounds, axis=1)[:, ::2])
    for per in parts:
        sq += _sum_sq(per, 1)
        if need_classes:
            classes += np.count_nonzero(per, axis=1)
    return sq, classes


_NO_TIES = _ValueRuns(np.ones(1, dtype=np.int64))


def _sum_sq(counts: np.ndarray, axis: int) -> np.ndarray:
    """Sum of squares of integer-valued float32 counts along ``axis``, exact."""
    if float(counts.max(initial=0.0)) <= 4096.0:  # squares below 2**24
        return (counts * counts).sum(axis=axis, dtype=np.float64)
    c64 = counts.astype(np.float64)
    return (c64 * c64).sum(axis=axis)


def _chunk(plan: _Plan, idx: np.ndarray, variant: str, exact32: bool) -> np.ndarray:
    rc, kx, ky = idx.shape[0], plan.kx, plan.ky
    quad = np.zeros(rc)
    wx = wy = None
    if not plan.grid_only:
        wx = _bincount_rows(plan.col_x, idx, plan.m)
        buf = np.empty_like(wx)
        quad += _quad_blocks(wx, plan.a_blocks, buf, exact32)  # pairs sharing an x-block
        if plan.b_blocks:
            wy = np.take(wx, plan.y_from_x, axis=1)
            quad += _quad_blocks(wy, plan.b_blocks, buf, exact32)  # pairs sharing only a y-block
        del buf
    # weight totals on the block grid, laid out (x-block, y-block, resample) so that the prefix
    # sums below run along outer axes, vectorised over the resamples (float32: every sum <= n)
    pre = np.zeros((kx + 1, ky + 1, rc), dtype=np.float32)
    grid = pre[1:, 1:]
    if plan.grid_by_count:
        grid[...] = _bincount_rows(plan.cell, idx, kx * ky).T.reshape(kx, ky, rc)
    else:
        for p, (s, e, oh_t) in enumerate(plan.grid_onehot):
            np.matmul(oh_t, wx[:, s:e].T, out=grid[p])
    grid = grid.copy()
    # prefix sums; a loop over the (few) blocks adds whole contiguous slabs, faster than np.cumsum
    for p in range(1, kx):
        pre[p + 1, 1:] += pre[p, 1:]
    for q in range(1, ky):
        pre[:, q + 1] += pre[:, q]
    # pairs in different x- and y-blocks: per cell, (weight below-left) - (weight below-right);
    # the other two quadrants mirror these
    h = pre[:kx, :ky] - pre[:kx, ky:]
    h += pre[:kx, 1:]
    quad += 2.0 * _coldot(grid.reshape(-1, rc), h.reshape(-1, rc), exact32)
    con_minus_dis = quad / 2.0

    size = grid.reshape(-1, rc).sum(axis=0, dtype=np.float64)
    tot = size * (size - 1.0) / 2.0
    # copies of each distinct x (y) value per resample; when blocks are single values, grid margins
    need_classes = variant == "c"
    if plan.x_single:
        per_x = grid.sum(axis=1)
        sq_x, cls_x = _sum_sq(per_x, 0), np.count_nonzero(per_x, axis=0)
    else:
        sq_x, cls_x = _value_stats(wx, plan.x_values, need_classes)
    if plan.y_single:
        per_y = grid.sum(axis=0)
        sq_y, cls_y = _sum_sq(per_y, 0), np.count_nonzero(per_y, axis=0)
    else:
        if wy is None:
            wy = np.take(wx, plan.y_from_x, axis=1)
        sq_y, cls_y = _value_stats(wy, plan.y_values, need_classes)
    xtie = (sq_x - size) / 2.0
    ytie = (sq_y - size) / 2.0
    undefined = (xtie == tot) | (ytie == tot)
    with np.errstate(divide="ignore", invalid="ignore"):
        if variant == "b":
            tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
        else:
            minclasses = np.minimum(cls_x, cls_y).astype(np.float64)
            tau = 2.0 * con_minus_dis / (size**2 * (minclasses - 1.0) / minclasses)
    tau = np.clip(tau, -1.0, 1.0)
    tau[undefined] = np.nan
    return tau
