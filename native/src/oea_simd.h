/*
 * oea_simd.h - 4-wide host versions of oea_row.h's per-element arithmetic,
 * for the CPU reference's hot loops (oea_cpu.c). Host only: the kernel never
 * includes it.
 *
 * Written with GCC/Clang generic vectors (vector_size), not with x86
 * intrinsics, so it builds for SSE2 (the x86-64 baseline) and NEON alike and
 * needs no CPU dispatch. Each lane computes exactly the scalar expression of
 * oea_row.h: the same IEEE operations in the same order, the scalar
 * branches replaced by computing every side and selecting by mask. So every
 * lane's result is bitwise the scalar one (test_oea_cpu's numerics group
 * checks oea_exp4 against oea_exp over the whole useful range and the
 * special values). The library is built with -ffp-contract=off, which also
 * keeps vector multiplies and adds from being fused.
 */
#ifndef OEA_SIMD_H
#define OEA_SIMD_H

#include <stdint.h>
#include <string.h>

#include "oea_row.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef float oea_v4f __attribute__((vector_size(16)));
typedef int32_t oea_v4i __attribute__((vector_size(16)));
typedef uint32_t oea_v4u __attribute__((vector_size(16)));

static inline oea_v4f oea_v4f_splat(float x)
{
	return (oea_v4f){x, x, x, x};
}

static inline oea_v4i oea_v4i_splat(int32_t x)
{
	return (oea_v4i){x, x, x, x};
}

/* Unaligned load and store (memcpy: no alignment or aliasing assumption). */
static inline oea_v4f oea_v4f_load(const float *p)
{
	oea_v4f v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void oea_v4f_store(float *p, oea_v4f v)
{
	memcpy(p, &v, sizeof v);
}

/* Lane-wise m ? a : b, m being a comparison result (all ones or zero). */
static inline oea_v4f oea_v4f_sel(oea_v4i m, oea_v4f a, oea_v4f b)
{
	return (oea_v4f)((m & (oea_v4i)a) | (~m & (oea_v4i)b));
}

static inline oea_v4i oea_v4i_sel(oea_v4i m, oea_v4i a, oea_v4i b)
{
	return (m & a) | (~m & b);
}

/* The mask's lanes as bits 0..3 (masks are all ones or zero). */
static inline unsigned oea_v4_mask(oea_v4i m)
{
#if defined(__SSE2__)
	return (unsigned)_mm_movemask_ps((__m128)m);
#else
	return (m[0] & 1u) | (m[1] & 2u) | (m[2] & 4u) | (m[3] & 8u);
#endif
}

/* 1 when some lane of the mask is set (masks are all ones or zero). */
static inline int oea_v4_any(oea_v4i m)
{
#if defined(__SSE2__)
	return _mm_movemask_ps((__m128)m) != 0;
#else
	uint64_t q[2];
	memcpy(q, &m, sizeof q);
	return (q[0] | q[1]) != 0;
#endif
}

/* oea_pow2i per lane, for -126 <= k <= 127. */
static inline oea_v4f oea_pow2i4(oea_v4i k)
{
	return (oea_v4f)(((oea_v4u)(k + 127)) << 23);
}

#define OEA_V4(c) oea_v4f_splat(c)

/* oea_exp's polynomial: y = 1 + r + r^2 p(r), in its order. */
static inline __attribute__((always_inline)) oea_v4f oea_exp4_poly(oea_v4f r)
{
	oea_v4f r2 = r * r, p = OEA_V4(1.9875691500e-4f), y;

	p = p * r + OEA_V4(1.3981999507e-3f);
	p = p * r + OEA_V4(8.3334519073e-3f);
	p = p * r + OEA_V4(4.1665795894e-2f);
	p = p * r + OEA_V4(1.6666665459e-1f);
	p = p * r + OEA_V4(5.0000001201e-1f);
	y = p * r2;
	y = y + r;
	y = y + OEA_V4(1.0f);
	return y;
}

/*
 * k of oea_exp: (int)(t < 0 ? t - 0.5f : t + 0.5f). Adding 0.5 with t's sign
 * is the same: t - 0.5f is t + -0.5f exactly, and t = -0 gives -0.5 instead
 * of 0.5, which truncates to the same 0.
 */
static inline __attribute__((always_inline)) oea_v4i oea_exp4_k(oea_v4f t, oea_v4i live)
{
	oea_v4i sign = (oea_v4i)t & oea_v4i_splat(INT32_MIN);
	oea_v4f tr = t + (oea_v4f)((oea_v4i)OEA_V4(0.5f) | sign);
	return __builtin_convertvector(oea_v4f_sel(live, tr, OEA_V4(0.0f)), oea_v4i);
}

/*
 * oea_exp per lane, any input. The order of operations is oea_exp's line by
 * line; the early returns (NaN, overflow, underflow) and the three scalings
 * become selections. Lanes that return early convert 0 instead of their t,
 * so that the float-to-int conversion is defined on every lane.
 */
static __attribute__((noinline)) oea_v4f oea_exp4_any(oea_v4f x)
{
	oea_v4i nan = x != x;
	oea_v4i over = x > OEA_V4(88.72283935546875f);
	oea_v4i under = x < OEA_V4(-103.972084045410156f);
	oea_v4f kf, r, v;
	oea_v4i k, big, small;

	k = oea_exp4_k(x * OEA_V4(1.44269504088896341f), ~(nan | over | under));
	kf = __builtin_convertvector(k, oea_v4f);
	r = x - kf * OEA_V4(0.693359375f);
	r = r - kf * OEA_V4(-2.12194440e-4f);
	/* k > 127: y * 2^(k-1) * 2; k < -126: y * 2^(k+64) * 2^-64; else y * 2^k. */
	big = k > 127;
	small = k < -126;
	v = oea_exp4_poly(r) * oea_pow2i4(oea_v4i_sel(big, k - 1, oea_v4i_sel(small, k + 64, k)));
	v = oea_v4f_sel(big, v * OEA_V4(2.0f), oea_v4f_sel(small, v * OEA_V4(oea_pow2i(-64)), v));
	v = oea_v4f_sel(under, OEA_V4(0.0f), v);
	v = oea_v4f_sel(over, OEA_V4(oea_f_from_bits(0x7f800000u)), v);
	return oea_v4f_sel(nan, x, v);
}

/*
 * oea_exp per lane for inputs in [-87, 88] (softmax's l - m and sigmoid's -l
 * of ordinary logits): they are not NaN, neither overflow nor underflow, and
 * give k within [-126, 127], so oea_exp takes its plain path on every lane.
 */
static inline __attribute__((always_inline)) oea_v4f oea_exp4_plain(oea_v4f x)
{
	oea_v4i k;
	oea_v4f kf, r;

	k = oea_exp4_k(x * OEA_V4(1.44269504088896341f), oea_v4i_splat(-1));
	kf = __builtin_convertvector(k, oea_v4f);
	r = x - kf * OEA_V4(0.693359375f);
	r = r - kf * OEA_V4(-2.12194440e-4f);
	return oea_exp4_poly(r) * oea_pow2i4(k);
}

/* oea_exp per lane: the plain path inlined, anything else oea_exp4_any. */
static inline __attribute__((always_inline)) oea_v4f oea_exp4(oea_v4f x)
{
	if (oea_v4_any(~((x >= OEA_V4(-87.0f)) & (x <= OEA_V4(88.0f)))))
		return oea_exp4_any(x);
	return oea_exp4_plain(x);
}

/* oea_score per lane (the scalar's m and s for softmax). */
static inline oea_v4f oea_score4(oea_v4f l, int scoring, float m, float s)
{
	if (scoring == OEA_SCORING_SIGMOID)
		return OEA_V4(1.0f) / (OEA_V4(1.0f) + oea_exp4(-l));
	return oea_exp4(l - OEA_V4(m)) / OEA_V4(s);
}

#endif /* OEA_SIMD_H */
