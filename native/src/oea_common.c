/*
 * oea_common.c - what both entry points share on the host: versions, status
 * messages and the argument check.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "oea.h"
#include "oea_internal.h"
#include "oea_row.h" /* oea_dtype_size */

#ifndef OEA_VERSION_STRING
#define OEA_VERSION_STRING "3.1.0"
#endif

/* Strides beyond this would overflow size arithmetic for n <= OEA_MAX_ROWS. */
#define OEA_MAX_STRIDE ((int64_t)1 << 40)

int oea_abi_version(void)
{
	return OEA_ABI_VERSION;
}

const char *oea_version(void)
{
	return OEA_VERSION_STRING;
}

const char *oea_status_message(int status)
{
	switch (status) {
	case OEA_OK:
		return "ok";
	case OEA_ERR_NULL_ARGUMENT:
		return "null argument: the problem, logits, ids and weights must be non-NULL "
		       "(the three arrays may be NULL only when n == 0)";
	case OEA_ERR_STRUCT_SIZE:
		return "struct_size is smaller than oea_problem of ABI version 1: "
		       "set it to sizeof(oea_problem)";
	case OEA_ERR_SHAPE:
		return "shape out of range: need 0 <= n <= 1024, 1 <= num_experts <= 512, "
		       "1 <= top_k <= 16 and 0 <= num_shared < top_k";
	case OEA_ERR_K0:
		return "k0 must be >= 1 (k0 >= top_k - num_shared leaves rows unchanged)";
	case OEA_ERR_DTYPE:
		return "unsupported dtype: logits must be f32, bf16 or f16, ids i32 or i64, "
		       "weights f32";
	case OEA_ERR_STRIDE:
		return "row stride out of range: logits stride must be >= num_experts, ids and "
		       "weights strides >= top_k (in elements, at most 2^40)";
	case OEA_ERR_ALIGNMENT:
		return "misaligned pointer: every array must be aligned to its element size "
		       "(stats and num_valid_rows to 4 bytes, totals to 8)";
	case OEA_ERR_SCORING:
		return "unknown scoring function: use OEA_SCORING_SOFTMAX or OEA_SCORING_SIGMOID";
	case OEA_ERR_GROUPS:
		return "bad expert groups: num_expert_group must be >= 0 and divide num_experts, "
		       "and topk_group must be in 1..num_expert_group when grouping";
	case OEA_ERR_NONFINITE:
		return "non-finite logits or correction bias (NaN or inf) in a processed row, "
		       "refused because of OEA_FLAG_REJECT_NONFINITE";
	case OEA_ERR_INVALID_ARGUMENT:
		return "invalid argument: unknown flag bits, renormalize not 0 or 1, reserved_abi2 "
		       "not 0, or OEA_FLAG_REJECT_NONFINITE given to the CUDA path (it cannot read "
		       "device data)";
	case OEA_ERR_NO_CUDA:
		return "liboea was not built with CUDA: oea_route_cuda is unavailable, "
		       "use oea_route_host or rebuild with -DOEA_CUDA=ON";
	case OEA_ERR_CUDA:
		return "the CUDA kernel launch failed (cudaGetLastError after the launch: no "
		       "usable device, or a bad stream)";
	default:
		return "unknown oea status code";
	}
}

static int oea_misaligned(const void *ptr, size_t align)
{
	return ((uintptr_t)ptr & (align - 1)) != 0;
}

/* The checks after the struct size, on a complete (current-ABI) struct. The
 * order is documented in docs/native-abi.md and is part of the ABI: callers
 * and tests rely on which error comes first. */
static int oea_problem_check_full(const oea_problem *p)
{
	if ((p->flags & ~(OEA_FLAG_REJECT_NONFINITE | OEA_FLAG_COUNT_ONLY)) != 0 ||
	    (p->renormalize != 0 && p->renormalize != 1) || p->reserved_abi2 != 0)
		return OEA_ERR_INVALID_ARGUMENT;
	if (p->n < 0 || p->n > OEA_MAX_ROWS || p->num_experts < 1 ||
	    p->num_experts > OEA_MAX_EXPERTS || p->top_k < 1 || p->top_k > OEA_MAX_TOPK ||
	    p->num_shared < 0 || p->num_shared >= p->top_k)
		return OEA_ERR_SHAPE;
	if (p->k0 < 1)
		return OEA_ERR_K0;
	if ((p->logits_dtype != OEA_DTYPE_F32 && p->logits_dtype != OEA_DTYPE_BF16 &&
	     p->logits_dtype != OEA_DTYPE_F16) ||
	    (p->ids_dtype != OEA_DTYPE_I32 && p->ids_dtype != OEA_DTYPE_I64) ||
	    p->weights_dtype != OEA_DTYPE_F32)
		return OEA_ERR_DTYPE;
	if (p->scoring != OEA_SCORING_SOFTMAX && p->scoring != OEA_SCORING_SIGMOID)
		return OEA_ERR_SCORING;
	if (p->num_expert_group < 0 ||
	    (p->num_expert_group > 0 &&
	     (p->num_experts % p->num_expert_group != 0 || p->topk_group < 1 ||
	      p->topk_group > p->num_expert_group)))
		return OEA_ERR_GROUPS;
	if (p->logits_row_stride < p->num_experts || p->logits_row_stride > OEA_MAX_STRIDE ||
	    p->ids_row_stride < p->top_k || p->ids_row_stride > OEA_MAX_STRIDE ||
	    p->weights_row_stride < p->top_k || p->weights_row_stride > OEA_MAX_STRIDE)
		return OEA_ERR_STRIDE;
	if (p->n > 0 && (!p->logits || !p->ids || !p->weights))
		return OEA_ERR_NULL_ARGUMENT;
	if (oea_misaligned(p->logits, oea_dtype_size(p->logits_dtype)) ||
	    oea_misaligned(p->ids, oea_dtype_size(p->ids_dtype)) ||
	    oea_misaligned(p->weights, sizeof(float)) ||
	    oea_misaligned(p->correction_bias, sizeof(float)) ||
	    oea_misaligned(p->num_valid_rows, sizeof(int32_t)) ||
	    oea_misaligned(p->stats, sizeof(uint32_t)) ||
	    oea_misaligned(p->totals, sizeof(uint64_t)))
		return OEA_ERR_ALIGNMENT;
	return OEA_OK;
}

int oea_problem_load(const oea_problem *p, oea_problem *q)
{
	size_t have;

	memset(q, 0, sizeof *q);
	if (!p)
		return OEA_ERR_NULL_ARGUMENT;
	if (p->struct_size < OEA_PROBLEM_SIZE_V1)
		return OEA_ERR_STRUCT_SIZE;
	/* Never read past what the caller says it has. Any size below ABI 2's
	 * is an ABI 1 struct (it ends before min_valid_rows, which keeps its
	 * zero: no gate); any size below ABI 3's an ABI 2 struct (totals stays
	 * NULL: no sums); a larger one is a newer caller's, read up to ours. */
	have = p->struct_size < OEA_PROBLEM_SIZE_V2 ? OEA_PROBLEM_SIZE_V1
	       : p->struct_size < sizeof *q         ? OEA_PROBLEM_SIZE_V2
						    : sizeof *q;
	memcpy(q, p, have);
	q->struct_size = sizeof *q;
	return oea_problem_check_full(q);
}

int oea_problem_check(const oea_problem *p)
{
	oea_problem q;

	return oea_problem_load(p, &q);
}

#if !defined(OEA_WITH_CUDA)
int oea_has_cuda(void)
{
	return 0;
}

int oea_route_cuda(const oea_problem *p, void *stream)
{
	(void)p;
	(void)stream;
	return OEA_ERR_NO_CUDA;
}
#endif
