/*
 * oea_route_dump.c - the same OEA problems routed by two builds of liboea,
 * to compare them byte for byte (tests/e2e/test_wheel.sh: the x86_64 and
 * the aarch64 wheel's liboea, the latter under qemu-user).
 *
 *   oea_route_dump gen SEED COUNT FILE   writes COUNT random problems
 *                                        (native/tests/oea_testcase.h) to FILE
 *   oea_route_dump route LIBOEA FILE     loads LIBOEA (dlopen), routes every
 *                                        problem of FILE with oea_route_host
 *                                        and prints the status, the stats and
 *                                        the whole ids and weights buffers in hex
 *
 * The problems are generated once, on one machine, and read by both: the
 * generator draws its values through libm (logf, cosf), whose last bit may
 * differ between architectures, and the comparison must be of the router
 * alone. FILE is little-endian (both targets are).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oea.h"
#include "oea_testcase.h"

/* The scalar fields of a problem, in the order FILE holds them (int64 each). */
enum { F_FLAGS, F_N, F_E, F_K, F_S, F_K0, F_SCORING, F_RENORM, F_NEG, F_TKG, F_LDT, F_LSTRIDE, F_IDT, F_WDT,
       F_ISTRIDE, F_WSTRIDE, F_HAS_BIAS, F_HAS_NVR, F_NVR, F_MINVR, F_LBYTES, F_IBYTES, F_WBYTES, F_COUNT };

static int die(const char *what)
{
	fprintf(stderr, "oea_route_dump: %s\n", what);
	return 2;
}

static int gen(uint64_t seed, long count, const char *path)
{
	FILE *f = fopen(path, "wb");
	tc_rng r = { seed };
	if (!f)
		return die("cannot write the problem file");
	for (long c = 0; c < count; c++) {
		tcase tc;
		if (tcase_random(&tc, &r, 1L << 16))
			return die("out of memory");
		const oea_problem *p = &tc.p;
		int64_t v[F_COUNT] = {
			p->flags, p->n, p->num_experts, p->top_k, p->num_shared, p->k0, p->scoring, p->renormalize,
			p->num_expert_group, p->topk_group, p->logits_dtype, p->logits_row_stride, p->ids_dtype,
			p->weights_dtype, p->ids_row_stride, p->weights_row_stride, tc.bias != NULL,
			p->num_valid_rows != NULL, tc.nvr, p->min_valid_rows, (int64_t)tc.logits_bytes,
			(int64_t)tc.ids_bytes, (int64_t)tc.w_bytes,
		};
		fwrite(v, sizeof v, 1, f);
		fwrite(tc.logits, 1, tc.logits_bytes, f);
		if (tc.bias)
			fwrite(tc.bias, sizeof(float), (size_t)p->num_experts, f);
		fwrite(tc.ids0, 1, tc.ids_bytes, f);
		fwrite(tc.w0, 1, tc.w_bytes, f);
		tcase_free(&tc);
	}
	return fclose(f) ? die("cannot write the problem file") : 0;
}

static void hex(const char *name, const unsigned char *b, size_t n)
{
	printf("%s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

static int route(const char *lib, const char *path)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "oea_route_dump: %s\n", dlerror());
		return 2;
	}
	int (*route_host)(const oea_problem *) = (int (*)(const oea_problem *))dlsym(h, "oea_route_host");
	if (!route_host)
		return die("no oea_route_host in the library");
	FILE *f = fopen(path, "rb");
	if (!f)
		return die("cannot read the problem file");
	int64_t v[F_COUNT];
	for (long c = 0; fread(v, sizeof v, 1, f) == 1; c++) {
		oea_problem p;
		oea_stats st;
		int32_t nvr = (int32_t)v[F_NVR];
		unsigned char *logits = malloc((size_t)v[F_LBYTES]), *ids = malloc((size_t)v[F_IBYTES]),
			      *w = malloc((size_t)v[F_WBYTES]);
		float *bias = v[F_HAS_BIAS] ? malloc(sizeof(float) * (size_t)v[F_E]) : NULL;
		if (!logits || !ids || !w || (v[F_HAS_BIAS] && !bias))
			return die("out of memory");
		if (fread(logits, 1, (size_t)v[F_LBYTES], f) != (size_t)v[F_LBYTES] ||
		    (bias && fread(bias, sizeof(float), (size_t)v[F_E], f) != (size_t)v[F_E]) ||
		    fread(ids, 1, (size_t)v[F_IBYTES], f) != (size_t)v[F_IBYTES] ||
		    fread(w, 1, (size_t)v[F_WBYTES], f) != (size_t)v[F_WBYTES])
			return die("the problem file is cut short");
		memset(&p, 0, sizeof p);
		memset(&st, 0xa5, sizeof st);
		p.struct_size = sizeof p;
		p.flags = (uint32_t)v[F_FLAGS];
		p.n = (int32_t)v[F_N];
		p.num_experts = (int32_t)v[F_E];
		p.top_k = (int32_t)v[F_K];
		p.num_shared = (int32_t)v[F_S];
		p.k0 = (int32_t)v[F_K0];
		p.scoring = (int32_t)v[F_SCORING];
		p.renormalize = (int32_t)v[F_RENORM];
		p.num_expert_group = (int32_t)v[F_NEG];
		p.topk_group = (int32_t)v[F_TKG];
		p.logits_dtype = (int32_t)v[F_LDT];
		p.logits_row_stride = v[F_LSTRIDE];
		p.logits = logits;
		p.correction_bias = bias;
		p.ids_dtype = (int32_t)v[F_IDT];
		p.weights_dtype = (int32_t)v[F_WDT];
		p.ids_row_stride = v[F_ISTRIDE];
		p.weights_row_stride = v[F_WSTRIDE];
		p.ids = ids;
		p.weights = w;
		p.num_valid_rows = v[F_HAS_NVR] ? &nvr : NULL;
		p.stats = &st;
		p.min_valid_rows = (int32_t)v[F_MINVR];
		int status = route_host(&p);
		printf("problem %ld: n=%d E=%d K=%d status %d\n", c, p.n, p.num_experts, p.top_k, status);
		hex("stats", (const unsigned char *)&st, sizeof st);
		hex("ids", ids, (size_t)v[F_IBYTES]);
		hex("weights", w, (size_t)v[F_WBYTES]);
		free(logits);
		free(ids);
		free(w);
		free(bias);
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "gen"))
		return gen(strtoull(argv[2], NULL, 0), strtol(argv[3], NULL, 0), argv[4]);
	if (argc == 4 && !strcmp(argv[1], "route"))
		return route(argv[2], argv[3]);
	fprintf(stderr, "usage: oea_route_dump gen SEED COUNT FILE | route LIBOEA FILE\n");
	return 2;
}
