"""A NumPy reference of the fused warp, written from SPEC.md section 4 (no TensorFlow).

The spec's float32 arithmetic in the spec's order: the native ops (built with
-ffp-contract=off) agree with it to rounding noise. Used by tests/test_warp.py
and by the kit runner's CPU stand-in core (tests/_fake_gpu_core.py).
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
    """Step 2: NaN, X < 0, X > w - 1, Y < 0 or Y > h - 1."""
    with np.errstate(invalid="ignore"):
        return np.isnan(x) | np.isnan(y) | (x < 0) | (x > F(w - 1)) | (y < 0) | (y > F(h - 1))


def ref_bilinear(plane, x, y):
    """Step 3: clamped bilinear on one 2-D plane, lerp along x on both rows, then along y."""
    h, w = plane.shape
    x0f, y0f = np.floor(x), np.floor(y)
    a, b = x - x0f, y - y0f
    x0, y0 = x0f.astype(np.int64), y0f.astype(np.int64)
    xa, xb = np.clip(x0, 0, w - 1), np.clip(x0 + 1, 0, w - 1)
    ya, yb = np.clip(y0, 0, h - 1), np.clip(y0 + 1, 0, h - 1)
    p = plane.astype(F)
    one = F(1)
    top = (one - a) * p[ya, xa] + a * p[ya, xb]
    bottom = (one - a) * p[yb, xa] + a * p[yb, xb]
    return (one - b) * top + b * bottom


def ref_round_clamp(v):
    """Step 5's rounding: half away from zero, then [0, 255]."""
    t = np.trunc(v)
    r = np.where(np.abs(v - t) >= F(0.5), t + np.sign(v), t)
    return np.clip(r, 0, 255).astype(F)


def _finish(rgb, oob, bias, norm, oob_color, nchw):
    out = (rgb - np.asarray(bias, F)) * np.asarray(norm, F)  # step 6
    out[oob] = np.asarray(oob_color, F)
    return out.transpose(2, 0, 1) if nchw else out


def ref_yuv420(y, cb, cr, mats, out_hw, bias=(0, 0, 0), norm=(1, 1, 1), oob_color=(0, 0, 0), nchw=False):
    mats = np.broadcast_to(np.asarray(mats, F).reshape(-1, 3, 3), (len(y), 3, 3))
    h, w = y.shape[1:]
    outs = []
    for i in range(len(y)):
        x_src, y_src = ref_points(mats[i], *out_hw)
        oob = ref_oob(x_src, y_src, w, h)
        xs, ys = np.where(oob, F(0), x_src), np.where(oob, F(0), y_src)
        xc, yc = xs / F(2) - F(0.25), ys / F(2) - F(0.25)  # step 4
        lum = ref_bilinear(y[i], xs, ys)
        cbv = ref_bilinear(cb[i], xc, yc) - F(128)
        crv = ref_bilinear(cr[i], xc, yc) - F(128)
        r = lum + F(1.402) * crv
        g = lum - F(0.344136) * cbv - F(0.714136) * crv
        b = lum + F(1.772) * cbv
        rgb = np.stack([ref_round_clamp(r), ref_round_clamp(g), ref_round_clamp(b)], -1)
        outs.append(_finish(rgb, oob, bias, norm, oob_color, nchw))
    return np.stack(outs)


def ref_rgb(images, mats, out_hw, bias=(0, 0, 0), norm=(1, 1, 1), oob_color=(0, 0, 0), nchw=False):
    mats = np.broadcast_to(np.asarray(mats, F).reshape(-1, 3, 3), (len(images), 3, 3))
    h, w = images.shape[1:3]
    outs = []
    for i in range(len(images)):
        x_src, y_src = ref_points(mats[i], *out_hw)
        oob = ref_oob(x_src, y_src, w, h)
        xs, ys = np.where(oob, F(0), x_src), np.where(oob, F(0), y_src)
        chans = [ref_bilinear(images[i, :, :, c], xs, ys) for c in range(3)]
        if images.dtype == np.uint8:
            chans = [ref_round_clamp(c) for c in chans]
        outs.append(_finish(np.stack(chans, -1), oob, bias, norm, oob_color, nchw))
    return np.stack(outs)
