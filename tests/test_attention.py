"""oasr.attention and oasr.rel_pos_attention against a float64 reference written from the formulas.

The reference (:func:`reference`) takes ESPnet's relative term as the index formula
``bd[i, j] = (q_i + v) . p[T - 1 - i + j]`` (checked here against ESPnet's pad/view/slice rel_shift) and WeNet's
unshifted form as ``(q + v) p^T``, with the key-length and chunk masks built as dense [B, T, T] tensors. ``q + u``
and ``q + v`` are rounded to the storage dtype, as the op documents (and torch's add does). Outputs are poisoned
(NaN) before each launch. GPU tests are marked ``gpu``; the argument errors raised before any device check and the
reference itself run on any machine.

Tolerances (bf16 1e-2 / 1e-2, fp16 2e-3 / 2e-3) are the harness entry's (profiling/harness/ops/attention.py): the
probabilities are rounded to the storage dtype before the P V product and the output once more.
"""

from __future__ import annotations

import math

import pytest
import torch

import oasr
from profiling.harness.correctness import refcheck
from profiling.harness.ops import attention as entry

TOLERANCES = entry.TOLERANCES
ODD_T = (1, 2, 63, 65, 1000, 4099)


# ---------------------------------------------------------------------------
# The reference, from the formulas
# ---------------------------------------------------------------------------


def chunk_mask(t: int, chunk: int | None, left: int | None, device: torch.device | str = "cpu") -> torch.Tensor:
    """WeNet's subsequent_chunk_mask: row i True from max((i // c - left) * c, 0) (0 when left < 0) to
    min((i // c + 1) * c, t) - 1; all True without a chunk."""
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    if chunk is None:
        return torch.ones(t, t, dtype=torch.bool, device=device)
    start = torch.zeros_like(i) if left is None or left < 0 else ((i // chunk - left) * chunk).clamp(min=0)
    end = ((i // chunk + 1) * chunk).clamp(max=t)
    return (j >= start) & (j < end)


def dense_mask(batch: int, t: int, lengths: torch.Tensor | None, chunk: int | None, left: int | None, device):
    """[B, 1, T, T] True where query i may attend key j: j below the row's length (clamped to [0, T]), in the chunk."""
    keys = torch.ones(batch, t, dtype=torch.bool, device=device)
    if lengths is not None:
        keys = torch.arange(t, device=device) < lengths.to(device).clamp(0, t)[:, None].long()
    return (keys[:, None, :] & chunk_mask(t, chunk, left, device)[None])[:, None]


def reference(q, k, v, lengths=None, scale=None, chunk=None, left=None, p=None, u=None, vb=None, shift=True):
    """float64 [B, T, H, D]: softmax(((q + u) k^T + bd) * scale + mask) v, masked rows zero."""
    b, t, _, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale

    def heads(x):  # [B, T, H, D] -> [B, H, T, D], float64
        return x.double().transpose(1, 2)

    if p is None:
        scores = heads(q) @ heads(k).transpose(-2, -1)
    else:
        raw = heads(q + vb) @ p.double().permute(1, 2, 0)  # [B, H, T, P]: (q_i + v) . p_r
        if shift:  # row r of p is the relative position T - 1 - r; score (i, j) takes position i - j
            i = torch.arange(t, device=q.device)[:, None]
            j = torch.arange(t, device=q.device)[None, :]
            bd = raw.gather(-1, (t - 1 - i + j).expand(*raw.shape[:2], t, t))
        else:
            bd = raw
        scores = heads(q + u) @ heads(k).transpose(-2, -1) + bd
    mask = dense_mask(b, t, lengths, chunk, left, q.device)
    weights = torch.softmax((scores * scale).masked_fill(~mask, -math.inf), dim=-1).masked_fill(~mask, 0.0)
    return (weights @ heads(v)).transpose(1, 2)


def espnet_reference(q, k, v, p, u, vb, lengths=None):
    """ESPnet's arithmetic in float64 (pad/view/slice rel_shift), for the check of :func:`reference`."""
    key_mask = None
    if lengths is not None:
        key_mask = (torch.arange(q.shape[1]) < lengths[:, None])[:, None, None]
    inputs = {"q": q, "k": k, "v": v, "p": p, "pos_bias_u": u, "pos_bias_v": vb, "key_mask": key_mask}
    return entry._rel_pos_reference(inputs)


def make(b, t, h, d, dtype, device, seed=0, relative=False, shift=True, scale=1.0):
    """q, k, v as views of one packed QKV [B, T, 3, H, D], and p, u, v for the relative form."""
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape, s=1.0):
        return (s * torch.randn(*shape, generator=generator)).to(dtype=dtype, device=device)

    qkv = randn(b, t, 3, h, d, s=scale)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    if not relative:
        return q, k, v
    p = randn(2 * t - 1 if shift else t, h, d)
    return q, k, v, p, randn(h, d, s=0.1), randn(h, d, s=0.1)


def check(result, expected, dtype):
    rtol, atol = TOLERANCES[str(dtype).removeprefix("torch.")]
    assert not result.isnan().any(), "unwritten (poisoned) or NaN outputs"
    torch.testing.assert_close(result.double(), expected.to(result.device), rtol=rtol, atol=atol)


def poisoned(q):
    return torch.full(q.shape, float("nan"), dtype=q.dtype, device=q.device)


# ---------------------------------------------------------------------------
# CPU: the reference itself
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [1, 2, 5, 17])
def test_reference_rel_shift_is_espnets(t):
    """The index formula equals ESPnet's pad/view/slice rel_shift (with key lengths, a row of length 1)."""
    q, k, v, p, u, vb = make(3, t, 2, 64, torch.float64, "cpu", seed=t, relative=True)
    lengths = torch.tensor([t, 1, max(1, t // 2)], dtype=torch.int32)
    torch.testing.assert_close(
        reference(q, k, v, lengths, p=p, u=u, vb=vb), espnet_reference(q, k, v, p, u, vb, lengths)
    )


def test_reference_rel_shift_index_map():
    """rel_shift takes position i - j: entry (i, j) of the shifted matrix is raw[i, j + T - 1 - i]."""
    t = 6
    raw = torch.arange(t * (2 * t - 1), dtype=torch.float64).view(1, 1, t, 2 * t - 1)
    shifted = entry.rel_shift(raw)
    for i in range(t):
        for j in range(t):
            assert shifted[0, 0, i, j] == raw[0, 0, i, j + t - 1 - i]


def test_reference_unshifted_is_a_second_key():
    """WeNet's form: softmax(((q + u) k^T + (q + v) p^T) / sqrt(D)) v, written as one product over [k, p]."""
    q, k, v, p, u, vb = make(2, 9, 3, 64, torch.float64, "cpu", seed=1, relative=True, shift=False)
    scores = torch.einsum("bihd,bjhd->bhij", q + u, k) + torch.einsum("bihd,jhd->bhij", q + vb, p)
    expected = torch.einsum("bhij,bjhd->bihd", torch.softmax(scores / 8.0, dim=-1), v)
    torch.testing.assert_close(reference(q, k, v, p=p, u=u, vb=vb, shift=False), expected)


def test_reference_plain_is_sdpa_with_masks():
    """Without p: SDPA's math on [B, H, T, D] with the dense mask (chunk 4, one chunk left, lengths)."""
    q, k, v = make(2, 13, 2, 64, torch.float64, "cpu", seed=2)
    lengths = torch.tensor([13, 7], dtype=torch.int32)
    mask = dense_mask(2, 13, lengths, 4, 1, "cpu")
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    ).transpose(1, 2)
    torch.testing.assert_close(reference(q, k, v, lengths, chunk=4, left=1), expected)


def test_chunk_mask_is_wenets():
    """subsequent_chunk_mask's loop, written out: chunk 3 of 10 frames, with 0, 1 and all chunks left."""
    t, c = 10, 3
    for left in (0, 1, -1):
        expected = torch.zeros(t, t, dtype=torch.bool)
        for i in range(t):
            start = 0 if left < 0 else max((i // c - left) * c, 0)
            expected[i, start : min((i // c + 1) * c, t)] = True
        assert torch.equal(chunk_mask(t, c, left), expected)


def test_reference_row_without_keys_is_zero():
    q, k, v = make(1, 8, 1, 64, torch.float64, "cpu")
    out = reference(q, k, v, torch.tensor([0], dtype=torch.int32))
    assert torch.equal(out, torch.zeros_like(out))


# ---------------------------------------------------------------------------
# CPU: the harness entry
# ---------------------------------------------------------------------------


def test_harness_work_model():
    config = {"b": 2, "t": 100, "h": 4, "d": 64, "kmin": 100}
    plain = entry.ATTENTION.work(config, torch.bfloat16)
    assert plain.flops == {"tensor_bf16": 2 * 2 * 2 * 4 * 100 * 100 * 64}
    assert plain.bytes == 4 * 2 * 100 * 4 * 64 * 2
    relative = entry.REL_POS_ATTENTION.work({**config, "kmin": 50}, torch.float16)
    assert relative.flops == {"tensor_fp16": 3 * 2 * 2 * 4 * 100 * 75 * 64}
    assert relative.bytes == (4 * 2 * 100 * 4 * 64 + 199 * 4 * 64 + 2 * 4 * 64) * 2


@pytest.mark.parametrize("op", [entry.ATTENTION, entry.REL_POS_ATTENTION], ids=lambda o: o.name)
def test_harness_torch_backend_matches_its_reference_on_cpu(op):
    config = {"b": 2, "t": 33, "h": 2, "d": 64, "kmin": 50}
    inputs = op.make_inputs(config, torch.bfloat16, torch.device("cpu"), 0)
    assert inputs["q"].data_ptr() + 2 * 64 * 2 == inputs["k"].data_ptr()  # views of one packed QKV
    check(op.backends["torch"](inputs), op.reference_for("torch")(inputs), torch.bfloat16)
    if op is entry.REL_POS_ATTENTION:  # the harness's reference (ESPnet's arithmetic) is the formula's
        i = inputs
        lengths = i["lengths"]
        expected = reference(i["q"], i["k"], i["v"], lengths, p=i["p"], u=i["pos_bias_u"], vb=i["pos_bias_v"])
        torch.testing.assert_close(op.reference(inputs), expected)


# ---------------------------------------------------------------------------
# CPU: bad arguments, refused before any device check
# ---------------------------------------------------------------------------


def _relative_args(t=5, h=2, d=64, dtype=torch.bfloat16):
    q, k, v, p, u, vb = make(2, t, h, d, dtype, "cpu", relative=True)
    return [q, k, v, p, u, vb]


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda a: a.__setitem__(1, a[1][:, :4]), ValueError, "`k` has shape"),
        (lambda a: a.__setitem__(2, a[2].float()), TypeError, "`v` has dtype torch.float32, expected torch.bfloat16"),
        (lambda a: a.__setitem__(0, a[0].float()), TypeError, "`q` has dtype torch.float32"),
        (lambda a: a.__setitem__(0, a[0][0]), ValueError, "`q` must be 4-D"),
        (lambda a: a.__setitem__(0, "q"), TypeError, "`q` must be a torch.Tensor"),
        (lambda a: a.__setitem__(3, a[3][1:]), ValueError, r"`p` has shape \(8, 2, 64\) \(too short for T\)"),
        (lambda a: a.__setitem__(3, a[3][0]), ValueError, "`p` must be 3-D"),
        (lambda a: a.__setitem__(4, a[4][:1]), ValueError, "`pos_bias_u` has shape"),
        (lambda a: a.__setitem__(5, a[5].half()), TypeError, "`pos_bias_v` has dtype"),
        (lambda a: a.__setitem__(0, a[0].transpose(2, 3)), ValueError, "head size D = 2"),
    ],
    ids=["k-shape", "v-dtype", "q-dtype", "q-dims", "q-type", "p-short", "p-dims", "u-shape", "v-bias-dtype", "d"],
)
def test_rel_pos_bad_arguments(change, error, match):
    args = _relative_args()
    change(args)
    with pytest.raises(error, match=match):
        oasr.rel_pos_attention(*args)


def test_unsupported_head_size():
    q, k, v = make(1, 4, 2, 32, torch.float16, "cpu")
    with pytest.raises(ValueError, match="head size D = 32"):
        oasr.attention(q, k, v)


def test_head_size_must_be_contiguous():
    q = torch.zeros(1, 4, 64, 2, dtype=torch.float16).transpose(2, 3)
    with pytest.raises(ValueError, match=r"`q`'s last dimension \(D\) must be contiguous"):
        oasr.attention(q, q, q)


def test_unshifted_p_has_t_rows():
    q, k, v, p, u, vb = make(1, 5, 2, 64, torch.bfloat16, "cpu", relative=True)  # p has 2T - 1 rows
    with pytest.raises(ValueError, match=r"expected \(5, 2, 64\): the T = 5 positions of shift=False"):
        oasr.rel_pos_attention(q, k, v, p, u, vb, shift=False)
    with pytest.raises(TypeError, match="`shift` must be a bool"):
        oasr.rel_pos_attention(q, k, v, p, u, vb, shift=1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"lengths": torch.ones(2, dtype=torch.int64)}, TypeError, "`lengths` has dtype torch.int64; expected"),
        ({"lengths": torch.ones(3, dtype=torch.int32)}, ValueError, r"`lengths` has shape \(3,\), expected \(2,\)"),
        ({"lengths": [5, 5]}, TypeError, "`lengths` must be a torch.Tensor or None"),
        ({"scale": 0.0}, ValueError, "`scale` must be finite and > 0"),
        ({"scale": math.nan}, ValueError, "`scale` must be finite and > 0"),
        ({"scale": "1"}, TypeError, "`scale` must be a real number"),
        ({"chunk_size": 0}, ValueError, "`chunk_size` must be >= 1"),
        ({"chunk_size": 2.0}, TypeError, "`chunk_size` must be an int"),
        ({"left_chunks": 2}, ValueError, "`left_chunks` needs `chunk_size`"),
        ({"chunk_size": 4, "left_chunks": True}, TypeError, "`left_chunks` must be an int"),
        ({"out": torch.empty(2, 5, 2, 64, dtype=torch.float16)}, TypeError, "`out` has dtype torch.float16"),
        ({"out": torch.empty(2, 5, 2, 128, dtype=torch.bfloat16)}, ValueError, "`out` has shape"),
    ],
    ids=["len-dtype", "len-shape", "len-type", "scale-0", "scale-nan", "scale-str", "chunk-0", "chunk-float",
         "left-alone", "left-bool", "out-dtype", "out-shape"],
)  # fmt: skip
def test_bad_options(kwargs, error, match):
    q, k, v = make(2, 5, 2, 64, torch.bfloat16, "cpu")
    with pytest.raises(error, match=match):
        oasr.attention(q, k, v, **kwargs)
    with pytest.raises(error, match=match):
        oasr.rel_pos_attention(*_relative_args(), **kwargs)


def test_host_tensors_refused_naming_q():
    q, k, v = make(1, 4, 1, 64, torch.bfloat16, "cpu")
    with pytest.raises(ValueError, match="`q` is on cpu, but Oasr kernels run on CUDA tensors"):
        oasr.attention(q, k, v)


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------

DTYPES = [torch.float16, torch.bfloat16]
DTYPE_IDS = ["fp16", "bf16"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("t", ODD_T)
def test_odd_attention(t, d, dtype):
    b, h = (1, 2) if t > 1000 else (2, 3)
    q, k, v = make(b, t, h, d, dtype, "cuda", seed=t)
    out = poisoned(q)
    assert oasr.attention(q, k, v, out=out) is out
    check(out, reference(q, k, v), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("shift", [True, False], ids=["espnet", "wenet"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("t", ODD_T)
def test_odd_rel_pos_attention(t, d, dtype, shift):
    b, h = (1, 2) if t > 1000 else (2, 3)
    q, k, v, p, u, vb = make(b, t, h, d, dtype, "cuda", seed=t, relative=True, shift=shift)
    out = poisoned(q)
    assert oasr.rel_pos_attention(q, k, v, p, u, vb, shift=shift, out=out) is out
    check(out, reference(q, k, v, p=p, u=u, vb=vb, shift=shift), dtype)


LENGTHS = {
    "with-a-1": [1, 65, 1, 40],
    "full": [65, 65, 65, 65],
    "mixed": [33, 64, 2, 65],
    "zero-and-past-t": [0, 80, -3, 17],  # clamped to [0, T]: rows of length 0 are zeros
}


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["plain", "espnet", "wenet"])
@pytest.mark.parametrize("kind", list(LENGTHS))
def test_lengths(kind, form):
    t, dtype = 65, torch.bfloat16
    lengths = torch.tensor(LENGTHS[kind], dtype=torch.int32, device="cuda")
    if form == "plain":
        q, k, v = make(4, t, 2, 64, dtype, "cuda", seed=3)
        out = oasr.attention(q, k, v, lengths)
        expected = reference(q, k, v, lengths)
    else:
        shift = form == "espnet"
        q, k, v, p, u, vb = make(4, t, 2, 64, dtype, "cuda", seed=3, relative=True, shift=shift)
        out = oasr.rel_pos_attention(q, k, v, p, u, vb, lengths, shift=shift)
        expected = reference(q, k, v, lengths, p=p, u=u, vb=vb, shift=shift)
    check(out, expected, dtype)
    if kind == "zero-and-past-t":
        assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(out[2], torch.zeros_like(out[2]))


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["plain", "espnet", "wenet"])
@pytest.mark.parametrize("left", [0, 2, -1])
@pytest.mark.parametrize("chunk, t", [(16, 250), (64, 1000), (5, 63)], ids=["c16-t250", "c64-t1000", "c5-t63"])
def test_chunk_masks(chunk, t, left, form):
    dtype = torch.float16
    lengths = torch.tensor([t, t // 3, 1], dtype=torch.int32, device="cuda")
    if form == "plain":
        q, k, v = make(3, t, 2, 64, dtype, "cuda", seed=chunk)
        out = oasr.attention(q, k, v, lengths, chunk_size=chunk, left_chunks=left)
        expected = reference(q, k, v, lengths, chunk=chunk, left=left)
    else:
        shift = form == "espnet"
        q, k, v, p, u, vb = make(3, t, 2, 64, dtype, "cuda", seed=chunk, relative=True, shift=shift)
        out = oasr.rel_pos_attention(q, k, v, p, u, vb, lengths, shift=shift, chunk_size=chunk, left_chunks=left)
        expected = reference(q, k, v, lengths, chunk=chunk, left=left, p=p, u=u, vb=vb, shift=shift)
    check(out, expected, dtype)


@pytest.mark.gpu
def test_chunk_larger_than_t_and_far_left():
    q, k, v = make(2, 70, 2, 64, torch.bfloat16, "cuda", seed=5)
    check(oasr.attention(q, k, v, chunk_size=1000, left_chunks=0), reference(q, k, v), torch.bfloat16)
    expected = reference(q, k, v, chunk=4, left=-1)
    check(oasr.attention(q, k, v, chunk_size=4, left_chunks=2**31 - 1), expected, torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["plain", "espnet"])
def test_single_head_and_scale(form):
    dtype = torch.bfloat16
    if form == "plain":
        q, k, v = make(3, 100, 1, 128, dtype, "cuda", seed=8)
        check(oasr.attention(q, k, v, scale=0.3), reference(q, k, v, scale=0.3), dtype)
    else:
        q, k, v, p, u, vb = make(3, 100, 1, 128, dtype, "cuda", seed=8, relative=True)
        out = oasr.rel_pos_attention(q, k, v, p, u, vb, scale=0.3)
        check(out, reference(q, k, v, scale=0.3, p=p, u=u, vb=vb), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("form", ["plain", "espnet"])
def test_extreme_logits(form, dtype):
    """Scores of about +-1e4 (scale 1): the running maximum keeps exp2 in range; a row of one valid key is v[0]."""
    t = 200
    lengths = torch.tensor([t, 1], dtype=torch.int32, device="cuda")
    if form == "plain":
        q, k, v = make(2, t, 2, 64, dtype, "cuda", seed=9, scale=14.0)
        out = oasr.attention(q, k, v, lengths, scale=1.0)
        expected = reference(q, k, v, lengths, scale=1.0)
    else:
        q, k, v, p, u, vb = make(2, t, 2, 64, dtype, "cuda", seed=9, relative=True, scale=14.0)
        out = oasr.rel_pos_attention(q, k, v, p, u, vb, lengths, scale=1.0)
        expected = reference(q, k, v, lengths, scale=1.0, p=p, u=u, vb=vb)
    scores = torch.einsum("bihd,bjhd->bhij", q.double(), k.double())
    assert scores.abs().max() > 5e3  # the case is extreme
    check(out, expected, dtype)
    torch.testing.assert_close(out[1], v[1, :1].expand(t, -1, -1), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["plain", "espnet", "wenet"])
def test_strided_and_unaligned_views(form):
    """q, k, v of other layouts (heads-first tensors transposed, a start 2 bytes off 16) and a strided out: read
    in place or copied, the result the same."""
    dtype = torch.float16
    b, t, h, d = 2, 77, 3, 64
    base = make(b, t, h, d, dtype, "cuda", seed=11, relative=form != "plain", shift=form != "wenet")
    q = base[0].transpose(1, 2).contiguous().transpose(1, 2)  # [B, T, H, D] view of a [B, H, T, D] tensor
    flat = torch.empty(q.numel() + 1, dtype=dtype, device="cuda")
    k = flat[1:].view(q.shape)  # start not 16-byte aligned: copied
    k.copy_(base[1])
    v = base[2]
    out_buffer = torch.full((b, t, h, d + 64), float("nan"), dtype=dtype, device="cuda")
    out = out_buffer[..., 32 : 32 + d]  # a strided out with 16-byte strides
    odd = torch.full((b * t * h * d + 1,), float("nan"), dtype=dtype, device="cuda")[1:].view(b, t, h, d)
    if form == "plain":
        expected = reference(q, k, v)
        oasr.attention(q, k, v, out=out)
        oasr.attention(q, k, v, out=odd)
    else:
        shift = form == "espnet"
        p, u, vb = base[3:]
        expected = reference(q, k, v, p=p, u=u, vb=vb, shift=shift)
        oasr.rel_pos_attention(q, k, v, p, u, vb, shift=shift, out=out)
        oasr.rel_pos_attention(q, k, v, p, u, vb, shift=shift, out=odd)
    check(out, expected, dtype)
    check(odd, expected, dtype)
    assert out_buffer[..., :32].isnan().all() and out_buffer[..., 32 + d :].isnan().all()


@pytest.mark.gpu
def test_empty_inputs():
    for shape in ((0, 5, 2, 64), (2, 0, 2, 64), (2, 5, 0, 64)):
        q = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
        assert oasr.attention(q, q, q).shape == shape
        p = torch.zeros(max(0, 2 * shape[1] - 1), shape[2], 64, dtype=torch.bfloat16, device="cuda")
        u = torch.zeros(shape[2], 64, dtype=torch.bfloat16, device="cuda")
        assert oasr.rel_pos_attention(q, q, q, p, u, u).shape == shape


@pytest.mark.gpu
def test_lengths_on_the_host_refused():
    q, k, v = make(2, 5, 2, 64, torch.bfloat16, "cuda")
    with pytest.raises(ValueError, match=r"`lengths` is on cpu, expected cuda:0 .* no host sync"):
        oasr.attention(q, k, v, torch.tensor([5, 5], dtype=torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["plain", "espnet"])
def test_out_overlapping_an_input_refused(form):
    q, k, v, p, u, vb = make(2, 5, 2, 64, torch.bfloat16, "cuda", relative=True)
    for out in (q, k):  # (k is a view inside q's range: the overlap with q is reported)
        with pytest.raises(ValueError, match=r"`out` and `q` must be different tensors|`out` overlaps `q`"):
            if form == "plain":
                oasr.attention(q, k, v, out=out)
            else:
                oasr.rel_pos_attention(q, k, v, p, u, vb, out=out)


@pytest.mark.gpu
def test_requires_grad_refused():
    q, k, v = make(1, 5, 2, 64, torch.bfloat16, "cuda")
    with pytest.raises(ValueError, match="`k` requires grad"):
        oasr.attention(q, k.detach().requires_grad_(), v)


@pytest.mark.gpu
def test_torch_compile_matches_eager():
    """One custom-op node per call under torch.compile(fullgraph=True), allocating or writing a given out."""
    q, k, v, p, u, vb = make(2, 70, 2, 64, torch.bfloat16, "cuda", seed=12, relative=True)
    lengths = torch.tensor([70, 33], dtype=torch.int32, device="cuda")

    def layer(q, k, v, p, u, vb, lengths, out):
        rel = oasr.rel_pos_attention(q, k, v, p, u, vb, lengths, chunk_size=16, left_chunks=1)
        return rel, oasr.attention(q, k, v, lengths, out=out)

    compiled = torch.compile(layer, fullgraph=True)
    rel, plain = compiled(q, k, v, p, u, vb, lengths, poisoned(q))
    expected_rel, expected_plain = layer(q, k, v, p, u, vb, lengths, poisoned(q))
    torch.testing.assert_close(rel, expected_rel, rtol=0, atol=0)
    torch.testing.assert_close(plain, expected_plain, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("op", [entry.ATTENTION, entry.REL_POS_ATTENTION], ids=lambda o: o.name)
@pytest.mark.parametrize("config", [entry.SWEEP[1], entry.SWEEP[-1]], ids=["ragged", "d128-ragged"])
def test_harness_entry_backends(op, config):
    inputs = op.make_inputs(config, torch.bfloat16, torch.device("cuda"), 0)
    checks = refcheck(op, inputs, ["oasr", "torch"], torch.bfloat16)
    assert all(c["passed"] for c in checks.values()), checks
