"""A NumPy reference of the fused warp, written from SPEC section 4 (no TensorFlow).

The spec's float32 arithmetic in the spec's order: the native ops (built with
-ffp-contract=off) agree with it to rounding noise. Used by tests/test_warp.py
and by the kit runner's CPU stand-in core (tests/_fake_gpu_core.py).

``antialias=True`` adds the footprint filter of custom_ops/lib/warp.h
("Antialiasing"), written here from that description: the Jacobian's columns u
and v (in texels of the plane sampled) stretched to at least 1 and at most 16
texels; texel t weighs tri(a) tri(b) with (a, b) = [u v]^-1 (t - p) and
tri(t) = max(0, 1 - |t|), over the texels of the plane, normalised; computed
per column and row when [u v] is diagonal, else over the footprint's bounding
box; the point sample where no column is longer than 1.001 texels. Out of bounds is
still the centre point's test.
"""

import numpy as np

F = np.float32


def ref_points(m, out_h, out_w):
    """Step 1: source points (X, Y), float32, of every output pixel."""
    m = np.asarray(m, F)
    yy, xx = np.mgrid[0:out_h, 0:out_w].astype(F)
    xp = (m[0, 0] * xx + m[0, 1] * yy) + m[0, 2]
    yp = (m[1, 0] * xx + m[1, 1] * yy) + m[1, 2]
    wp = (m[2, 0] * xx + m[2, 1] * yy) + m[2, 2]
    with np.errstate(all="ignore"):
        return xp / wp, yp / wp


def ref_oob(x, y, w, h):
    """Step 2 as bzna_tf computes it: NaN, X < -0.5, X > w - 0.5, Y < -0.5 or Y > h - 0.5.

    The picture covers half a pixel beyond its outer pixel centres; SPEC section 4 (Benzina's
    kernel) tests X < 0 and X > w - 1, which bzna_tf deviates from on purpose (README).
    """
    half = F(0.5)
    with np.errstate(invalid="ignore"):
        return np.isnan(x) | np.isnan(y) | (x < -half) | (x > F(w) - half) | (y < -half) | (y > F(h) - half)


def ref_bilinear(plane, x, y):
    """Step 3: clamped bilinear on one 2-D plane, lerp along x on both rows, then along y."""
    h, w = plane.shape
    x0f, y0f = np.floor(x), np.floor(y)
    a, b = x - x0f, y - y0f
    x0, y0 = x0f.astype(np.int64), y0f.astype(np.int64)
    xa, xb = np.clip(x0, 0, w - 1), np.clip(x0 + 1, 0, w - 1)
    ya, yb = np.clip(y0, 0, h - 1), np.clip(y0 + 1, 0, h - 1)
    one = F(1)
    top = (one - a) * plane[ya, xa].astype(F) + a * plane[ya, xb].astype(F)
    bottom = (one - a) * plane[yb, xa].astype(F) + a * plane[yb, xb].astype(F)
    return (one - b) * top + b * bottom


MAX_FOOTPRINT = F(16)
MAX_FLOAT = F(3.4028235e38)
MIN_REDUCTION = F(1.001)


def _column(dx, dy):
    """A Jacobian column stretched to at least 1 and at most 16 texels: (dx, dy, usable, reduces)."""
    length = np.sqrt(dx * dx + dy * dy)
    usable = (length > 0) & (length <= MAX_FLOAT)
    adjust = usable & ((length < 1) | (length > MAX_FOOTPRINT))
    target = np.where(length < 1, F(1), MAX_FOOTPRINT)
    dx = np.where(adjust, dx * target / length, dx)
    dy = np.where(adjust, dy * target / length, dy)
    return dx, dy, usable, length > MIN_REDUCTION


def _lengthen_chroma(dx, dy):
    """A chroma column of length c lengthened to sqrt(c^2 + 1) (warp.h, LengthenChromaColumn)."""
    length = np.sqrt(dx * dx + dy * dy)
    usable = (length > 0) & (length <= MAX_FLOAT)
    target = np.sqrt(length * length + F(1))
    return np.where(usable, dx * target / length, dx), np.where(usable, dy * target / length, dy)


def ref_footprint(m, out_h, out_w, x, y, scale, keep):
    """Footprint columns (ux, uy, vx, vy) per pixel in a plane `scale` times M's, and where it is a point.

    Chroma's (scale 0.5) are lengthened to sqrt(c^2 + 1) texels first (the luma's triangle over
    upsampled chroma, as one triangle over the chroma texels).
    """
    m = np.asarray(m, F)
    yy, xx = np.mgrid[0:out_h, 0:out_w].astype(F)
    scale = F(scale)
    with np.errstate(all="ignore"):
        wp = (m[2, 0] * xx + m[2, 1] * yy) + m[2, 2]
        u = (m[0, 0] - x * m[2, 0]) / wp * scale, (m[1, 0] - y * m[2, 0]) / wp * scale
        v = (m[0, 1] - x * m[2, 1]) / wp * scale, (m[1, 1] - y * m[2, 1]) / wp * scale
        if scale < 1:
            u, v = _lengthen_chroma(*u), _lengthen_chroma(*v)
        ux, uy, u_ok, u_reduces = _column(*u)
        vx, vy, v_ok, v_reduces = _column(*v)
    point = ~keep | ~(u_ok & v_ok) | ~(u_reduces | v_reduces)
    return ux, uy, vx, vy, point


def _triangle(t):
    w = F(1) - np.abs(t)
    return np.where(w > 0, w, F(0))


def _texel_range(c, reach, size):
    first = np.clip(np.floor(c - reach).astype(np.int64) + 1, 0, size - 1)
    return first, np.clip(np.floor(c + reach).astype(np.int64), 0, size - 1)


def _axis_weights(c, support, size):
    """Triangle weights of the texels within `support` of c: (first, weights (..., window), their sum)."""
    first, last = _texel_range(c, support, size)
    count = last - first + 1
    inverse = F(1) / support
    weights = np.zeros((*c.shape, int(count.max())), F)
    total = np.zeros(c.shape, F)
    for i in range(weights.shape[-1]):
        w = np.where(i < count, _triangle(((first + i).astype(F) - c) * inverse), F(0))
        weights[..., i] = w
        total = np.where(i < count, total + w, total)
    return first, weights, total


def _separable_sums(planes, x, y, support_x, support_y):
    """The diagonal footprint: rows of texels in order, each a sum over its columns in order; the total."""
    h, w = planes[0].shape
    col_first, col_weights, col_total = _axis_weights(x, support_x, w)
    row_first, row_weights, row_total = _axis_weights(y, support_y, h)
    values = [np.zeros(x.shape, F) for _ in planes]
    for r in range(row_weights.shape[-1]):
        ri = np.clip(row_first + r, 0, h - 1)
        lines = [np.zeros(x.shape, F) for _ in planes]
        for i in range(col_weights.shape[-1]):
            ci = np.clip(col_first + i, 0, w - 1)
            lines = [
                line + col_weights[..., i] * p[ri, ci].astype(F)
                for line, p in zip(lines, planes, strict=True)
            ]
        values = [v + row_weights[..., r] * line for v, line in zip(values, lines, strict=True)]
    return values, col_total * row_total


def _general_sums(planes, x, y, footprint):
    """Any footprint: (a, b) = F^-1 d for each texel of its bounding box, rows in order; the total."""
    ux, uy, vx, vy = footprint
    h, w = planes[0].shape
    with np.errstate(all="ignore"):
        det = ux * vy - vx * uy
        i00, i01, i10, i11 = vy / det, -vx / det, -uy / det, ux / det
    x0, x1 = _texel_range(x, np.abs(ux) + np.abs(vx), w)
    y0, y1 = _texel_range(y, np.abs(uy) + np.abs(vy), h)
    values = [np.zeros(x.shape, F) for _ in planes]
    total = np.zeros(x.shape, F)
    for oy in range(int((y1 - y0).max()) + 1):
        ty = y0 + oy
        dy = ty.astype(F) - y
        for ox in range(int((x1 - x0).max()) + 1):
            tx = x0 + ox
            dx = tx.astype(F) - x
            with np.errstate(all="ignore"):
                wt = _triangle(i00 * dx + i01 * dy) * _triangle(i10 * dx + i11 * dy)
            wt = np.where((ty <= y1) & (tx <= x1), wt, F(0))
            ri, ci = np.clip(ty, 0, h - 1), np.clip(tx, 0, w - 1)
            values = [v + wt * p[ri, ci].astype(F) for v, p in zip(values, planes, strict=True)]
            total = total + wt
    return values, total


def ref_filtered(planes, footprint, x, y):
    """Each plane sampled at (x, y) through its pixel's footprint, as warp.h's SampleFootprint does."""
    ux, uy, vx, vy, point = footprint
    plain = [ref_bilinear(p, x, y) for p in planes]
    if point.all():
        return plain
    diagonal = ~point & (uy == 0) & (vx == 0)
    general = ~point & ~diagonal
    one = F(1)  # the footprint of the pixels a path does not compute: small, so the loops stay short
    sep, sep_total = _separable_sums(
        planes, x, y, np.where(diagonal, np.abs(ux), one), np.where(diagonal, np.abs(vy), one)
    )
    if general.any():
        zero = F(0)
        gen, gen_total = _general_sums(
            planes,
            x,
            y,
            (
                np.where(general, ux, one),
                np.where(general, uy, zero),
                np.where(general, vx, zero),
                np.where(general, vy, one),
            ),
        )
    else:
        gen, gen_total = plain, np.zeros(x.shape, F)
    out = []
    with np.errstate(all="ignore"):
        for a, b, c in zip(plain, sep, gen, strict=True):
            b = np.where(sep_total > 0, b / sep_total, a)
            c = np.where(gen_total > 0, c / gen_total, a)
            out.append(np.where(diagonal, b, np.where(general, c, a)))
    return out


def ref_round_clamp(v):
    """Step 5's rounding: half away from zero, then [0, 255]."""
    t = np.trunc(v)
    r = np.where(np.abs(v - t) >= F(0.5), t + np.sign(v), t)
    return np.clip(r, 0, 255).astype(F)


def _finish(rgb, oob, bias, norm, oob_color, nchw):
    out = (rgb - np.asarray(bias, F)) * np.asarray(norm, F)  # step 6
    out[oob] = np.asarray(oob_color, F)
    return out.transpose(2, 0, 1) if nchw else out


def ref_yuv420(
    y,
    cb,
    cr,
    mats,
    out_hw,
    bias=(0, 0, 0),
    norm=(1, 1, 1),
    oob_color=(0, 0, 0),
    nchw=False,
    antialias=False,
):
    mats = np.broadcast_to(np.asarray(mats, F).reshape(-1, 3, 3), (len(y), 3, 3))
    h, w = y.shape[1:]
    outs = []
    for i in range(len(y)):
        x_src, y_src = ref_points(mats[i], *out_hw)
        oob = ref_oob(x_src, y_src, w, h)
        xs, ys = np.where(oob, F(0), x_src), np.where(oob, F(0), y_src)
        xc, yc = xs / F(2) - F(0.25), ys / F(2) - F(0.25)  # step 4
        if antialias:
            luma = ref_footprint(mats[i], *out_hw, xs, ys, 1, ~oob)
            (lum,) = ref_filtered([y[i]], luma, xs, ys)
            # Chroma is a point wherever the luma is (its lengthened columns alone would filter an
            # upscale's chroma), as in warp.h.
            *columns, chroma_point = ref_footprint(mats[i], *out_hw, xs, ys, 0.5, ~oob)
            chroma = (*columns, chroma_point | luma[4])
            cbv, crv = ref_filtered([cb[i], cr[i]], chroma, xc, yc)
            cbv, crv = cbv - F(128), crv - F(128)
        else:
            lum = ref_bilinear(y[i], xs, ys)
            cbv = ref_bilinear(cb[i], xc, yc) - F(128)
            crv = ref_bilinear(cr[i], xc, yc) - F(128)
        r = lum + F(1.402) * crv
        g = lum - F(0.344136) * cbv - F(0.714136) * crv
        b = lum + F(1.772) * cbv
        rgb = np.stack([ref_round_clamp(r), ref_round_clamp(g), ref_round_clamp(b)], -1)
        outs.append(_finish(rgb, oob, bias, norm, oob_color, nchw))
    return np.stack(outs)


def ref_rgb(
    images, mats, out_hw, bias=(0, 0, 0), norm=(1, 1, 1), oob_color=(0, 0, 0), nchw=False, antialias=False
):
    mats = np.broadcast_to(np.asarray(mats, F).reshape(-1, 3, 3), (len(images), 3, 3))
    h, w = images.shape[1:3]
    outs = []
    for i in range(len(images)):
        x_src, y_src = ref_points(mats[i], *out_hw)
        oob = ref_oob(x_src, y_src, w, h)
        xs, ys = np.where(oob, F(0), x_src), np.where(oob, F(0), y_src)
        planes = [images[i, :, :, c] for c in range(3)]
        if antialias:
            chans = ref_filtered(planes, ref_footprint(mats[i], *out_hw, xs, ys, 1, ~oob), xs, ys)
        else:
            chans = [ref_bilinear(p, xs, ys) for p in planes]
        if images.dtype == np.uint8:
            chans = [ref_round_clamp(c) for c in chans]
        outs.append(_finish(np.stack(chans, -1), oob, bias, norm, oob_color, nchw))
    return np.stack(outs)
