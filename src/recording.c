/*
 * recording.c - reads routing recordings (recording.h, docs/recording.md).
 *
 * Every number a header gives is checked before it is used to index the
 * mapping: the header length against the 64 MiB cap and the file, each
 * tensor's byte range against its dtype and shape and the chunk's data, the
 * tensors' ranges against each other (no hole, no overlap: the safetensors
 * rule), and each tensor against the role a call or layer gives it. So a
 * file that lies anywhere gets an error naming where, never a read outside
 * the mapping.
 */
#include "recording.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oea.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "recordings are little-endian and read in place: a big-endian host needs byte swapping here"
#endif

size_t oeap_rec_dtype_size(int32_t dtype)
{
	switch (dtype) {
	case OEA_DTYPE_F32:
	case OEA_DTYPE_I32:
		return 4;
	case OEA_DTYPE_BF16:
	case OEA_DTYPE_F16:
		return 2;
	case OEA_DTYPE_I64:
		return 8;
	default:
		return 0;
	}
}

static int32_t dtype_code(const char *s)
{
	static const struct {
		const char *name;
		int32_t code;
	} names[] = {{"F32", OEA_DTYPE_F32}, {"BF16", OEA_DTYPE_BF16}, {"F16", OEA_DTYPE_F16},
	             {"I32", OEA_DTYPE_I32}, {"I64", OEA_DTYPE_I64}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].code;
	return -1;
}

/* One tensor of a chunk's header, checked against the data. */
typedef struct tensor {
	const char *name;
	int32_t dtype;      /* -1: a dtype no role takes (refused when a role asks for it) */
	const char *dtype_name;
	int64_t shape[2];
	size_t ndim;
	uint64_t begin, end;
	int used;
} tensor;

/* Where errors point: the file, the chunk and the byte the chunk starts at. */
typedef struct place {
	const char *file;
	size_t chunk;
	uint64_t at;
	oeap_error *err;
} place;

static int bad(const place *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const place *p, const char *fmt, ...)
{
	char what[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return oeap_fail(p->err, OEAP_ERR_INPUT, p->file, 0, "chunk %zu (byte %" PRIu64 "): %s", p->chunk, p->at, what);
}

static int cmp_begin(const void *a, const void *b)
{
	const tensor *x = a, *y = b;
	return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* A JSON integer in [lo, hi], or -1 with the error. */
static int int_field(const place *p, json_t *obj, const char *what, const char *key, int64_t lo, int64_t hi,
                     int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return bad(p, "%s: \"%s\" must be an integer from %" PRId64 " to %" PRId64, what, key, lo, hi);
	*out = json_integer_value(v);
	return 0;
}

/* The tensors of a header (every key but __metadata__), sorted by their byte ranges, which must tile
 * [0, *data_len) exactly. */
static int read_tensors(const place *p, json_t *header, tensor **out, size_t *n, uint64_t *data_len)
{
	size_t cap = json_object_size(header);
	tensor *t = calloc(cap ? cap : 1, sizeof(*t));
	if (!t)
		return oeap_fail(p->err, OEAP_ERR_INTERNAL, p->file, 0, "out of memory");
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(header, key, v)
	{
		if (strcmp(key, "__metadata__") == 0)
			continue;
		tensor *x = &t[k];
		x->name = key;
		json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
		       *offs = json_object_get(v, "data_offsets");
		if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs) ||
		    json_array_size(offs) != 2)
			goto malformed;
		x->dtype_name = json_string_value(dt);
		x->dtype = dtype_code(x->dtype_name);
		x->ndim = json_array_size(shape);
		if (x->ndim > 2) {
			int rc = bad(p, "tensor \"%s\" has %zu dimensions: a recording's tensors have 1 or 2", key, x->ndim);
			free(t);
			return rc;
		}
		uint64_t elems = 1;
		for (size_t d = 0; d < x->ndim; d++) {
			json_t *s = json_array_get(shape, d);
			if (!json_is_integer(s) || json_integer_value(s) < 0 || json_integer_value(s) > (1 << 20))
				goto malformed;
			x->shape[d] = json_integer_value(s);
			elems *= (uint64_t)x->shape[d];
		}
		json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
		if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
		    json_integer_value(e) < json_integer_value(b))
			goto malformed;
		x->begin = (uint64_t)json_integer_value(b);
		x->end = (uint64_t)json_integer_value(e);
		size_t es = x->dtype >= 0 ? oeap_rec_dtype_size(x->dtype) : 0;
		/* elems <= 2^40: the product cannot overflow */
		if (es && x->end - x->begin != elems * es) {
			int rc = bad(p, "tensor \"%s\": %" PRIu64 " elements of %s take %" PRIu64 " bytes, its data_offsets "
			             "give %" PRIu64 " (the header lies about its sizes)",
			             key, elems, x->dtype_name, elems * es, x->end - x->begin);
			free(t);
			return rc;
		}
		k++;
		continue;
	malformed:;
		int rc = bad(p, "tensor \"%s\" is not {\"dtype\": string, \"shape\": [integers], \"data_offsets\": "
		             "[begin, end]}", key);
		free(t);
		return rc;
	}
	qsort(t, k, sizeof(*t), cmp_begin);
	uint64_t at = 0;
	for (size_t i = 0; i < k; i++) {
		if (t[i].begin != at) {
			int rc = bad(p, "tensor \"%s\" starts at data byte %" PRIu64 ", not %" PRIu64 " (%s)", t[i].name,
			             t[i].begin, at, t[i].begin > at ? "a hole" : "an overlap");
			free(t);
			return rc;
		}
		at = t[i].end;
	}
	*out = t;
	*n = k;
	*data_len = at;
	return 0;
}

static tensor *find_tensor(tensor *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	return NULL;
}

/* A tensor a role needs: present, not used by another role, of one of `dtypes` (codes, ended by -1) and
 * of the shape given (dims < 0: any). */
static tensor *role(const place *p, tensor *t, size_t n, const char *name, const int32_t *dtypes, int64_t d0,
                    int64_t d1, size_t ndim)
{
	tensor *x = find_tensor(t, n, name);
	if (!x) {
		bad(p, "tensor \"%s\" is missing", name);
		return NULL;
	}
	if (x->used) {
		bad(p, "tensor \"%s\" belongs to two calls (a seq repeated)", name);
		return NULL;
	}
	int ok = 0;
	for (const int32_t *d = dtypes; *d >= 0; d++)
		ok |= x->dtype == *d;
	if (!ok) {
		bad(p, "tensor \"%s\" has dtype %s, which its role does not take", name, x->dtype_name);
		return NULL;
	}
	if (x->ndim != ndim || (d0 >= 0 && x->shape[0] != d0) || (ndim == 2 && d1 >= 0 && x->shape[1] != d1)) {
		bad(p, "tensor \"%s\" has shape [%" PRId64 "%s%" PRId64 "], its layer needs [%s%" PRId64 "]", name,
		    x->shape[0], x->ndim == 2 ? ", " : "", x->ndim == 2 ? x->shape[1] : 0, ndim == 2 ? "rows, " : "",
		    ndim == 2 ? d1 : d0);
		return NULL;
	}
	x->used = 1;
	return x;
}

/* The layer with framework number `id` in rec, added (or checked equal to the one there). Returns its
 * index, or -1 with the error. */
static long merge_layer(const place *p, oeap_recording *rec, const oeap_rec_layer *l)
{
	for (size_t i = 0; i < rec->nlayers; i++) {
		const oeap_rec_layer *o = &rec->layers[i];
		if (o->id != l->id)
			continue;
		if (o->experts != l->experts || o->top_k != l->top_k || o->shared != l->shared || o->scoring != l->scoring ||
		    o->renormalize != l->renormalize || o->groups != l->groups || o->topk_group != l->topk_group ||
		    o->min_batch != l->min_batch || o->has_bias != l->has_bias)
			return bad(p, "layer %" PRId64 "'s settings differ from the ones recorded before for it", l->id);
		return (long)i;
	}
	oeap_rec_layer *nl = realloc(rec->layers, (rec->nlayers + 1) * sizeof(*nl));
	if (!nl)
		return oeap_fail(p->err, OEAP_ERR_INTERNAL, p->file, 0, "out of memory");
	rec->layers = nl;
	nl[rec->nlayers] = *l;
	return (long)rec->nlayers++;
}

static int keep_bias(oeap_recording *rec, float *b)
{
	if (rec->nbiases == rec->biases_cap) {
		size_t cap = rec->biases_cap ? rec->biases_cap * 2 : 16;
		float **nb = realloc(rec->biases, cap * sizeof(*nb));
		if (!nb)
			return -1;
		rec->biases = nb;
		rec->biases_cap = cap;
	}
	rec->biases[rec->nbiases++] = b;
	return 0;
}

static int add_call(oeap_recording *rec, const oeap_rec_call *c)
{
	if (rec->ncalls == rec->calls_cap) {
		size_t cap = rec->calls_cap ? rec->calls_cap * 2 : 256;
		oeap_rec_call *nc = realloc(rec->calls, cap * sizeof(*nc));
		if (!nc)
			return -1;
		rec->calls = nc;
		rec->calls_cap = cap;
	}
	rec->calls[rec->ncalls++] = *c;
	rec->rows += (uint64_t)c->rows;
	return 0;
}

/* The chunk's layers: their settings merged into rec, their biases copied. layer_ix/bias_of map the
 * JSON object's order. */
typedef struct chunk_layer {
	int64_t id;
	long index;
	const float *bias;
} chunk_layer;

static int read_layers(const place *p, oeap_recording *rec, json_t *layers, tensor *t, size_t nt,
                       const unsigned char *data, chunk_layer **out, size_t *n)
{
	size_t cap = json_object_size(layers);
	chunk_layer *cl = calloc(cap ? cap : 1, sizeof(*cl));
	if (!cl)
		return oeap_fail(p->err, OEAP_ERR_INTERNAL, p->file, 0, "out of memory");
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(layers, key, v)
	{
		char what[64], *end;
		snprintf(what, sizeof(what), "layer \"%.40s\"", key);
		errno = 0;
		long long id = strtoll(key, &end, 10);
		if (!*key || *end || errno || !json_is_object(v)) {
			bad(p, "%s: a layer is named by its number and described by an object", what);
			goto fail;
		}
		oeap_rec_layer l = {.id = id};
		int64_t x;
		if (int_field(p, v, what, "experts", 1, OEA_MAX_EXPERTS, &x))
			goto fail;
		l.experts = (int32_t)x;
		if (int_field(p, v, what, "top_k", 1, OEA_MAX_TOPK, &x))
			goto fail;
		l.top_k = (int32_t)x;
		if (int_field(p, v, what, "shared", 0, l.top_k - 1, &x))
			goto fail;
		l.shared = (int32_t)x;
		if (int_field(p, v, what, "groups", 0, l.experts, &x))
			goto fail;
		l.groups = (int32_t)x;
		if (int_field(p, v, what, "topk_group", 0, l.groups, &x))
			goto fail;
		l.topk_group = (int32_t)x;
		if (l.groups && (l.experts % l.groups || l.topk_group < 1)) {
			bad(p, "%s: %d groups of %d experts with topk_group %d (liboea takes groups that divide the experts "
			    "and a topk_group from 1 to the groups)", what, l.groups, l.experts, l.topk_group);
			goto fail;
		}
		if (int_field(p, v, what, "min_batch", 0, OEA_MAX_ROWS + 1, &x))
			goto fail;
		l.min_batch = (int32_t)x;
		json_t *sc = json_object_get(v, "scoring"), *rn = json_object_get(v, "renormalize"),
		       *bi = json_object_get(v, "bias");
		if (json_is_string(sc) && !strcmp(json_string_value(sc), "softmax"))
			l.scoring = OEA_SCORING_SOFTMAX;
		else if (json_is_string(sc) && !strcmp(json_string_value(sc), "sigmoid"))
			l.scoring = OEA_SCORING_SIGMOID;
		else {
			bad(p, "%s: \"scoring\" must be \"softmax\" or \"sigmoid\"", what);
			goto fail;
		}
		if (!json_is_boolean(rn)) {
			bad(p, "%s: \"renormalize\" must be true or false", what);
			goto fail;
		}
		l.renormalize = json_is_true(rn);
		if (!json_is_null(bi) && !json_is_string(bi)) {
			bad(p, "%s: \"bias\" must name a tensor or be null", what);
			goto fail;
		}
		l.has_bias = json_is_string(bi);
		cl[k].id = id;
		if (l.has_bias) {
			static const int32_t f32[] = {OEA_DTYPE_F32, -1};
			tensor *b = role(p, t, nt, json_string_value(bi), f32, l.experts, -1, 1);
			if (!b)
				goto fail;
			float *copy = malloc((size_t)l.experts * sizeof(float));
			if (!copy || keep_bias(rec, copy)) {
				free(copy);
				oeap_fail(p->err, OEAP_ERR_INTERNAL, p->file, 0, "out of memory");
				goto fail;
			}
			memcpy(copy, data + b->begin, (size_t)l.experts * sizeof(float));
			cl[k].bias = copy;
		}
		if ((cl[k].index = merge_layer(p, rec, &l)) < 0)
			goto fail;
		k++;
	}
	*out = cl;
	*n = k;
	return 0;
fail:
	free(cl);
	return -1;
}

static int read_calls(const place *p, oeap_recording *rec, uint32_t file, json_t *calls, tensor *t, size_t nt,
                      const unsigned char *data, const chunk_layer *cl, size_t ncl)
{
	static const int32_t logit_types[] = {OEA_DTYPE_F32, OEA_DTYPE_BF16, OEA_DTYPE_F16, -1};
	static const int32_t id_types[] = {OEA_DTYPE_I32, OEA_DTYPE_I64, -1};
	size_t i;
	json_t *v;
	json_array_foreach(calls, i, v)
	{
		char what[48];
		snprintf(what, sizeof(what), "call %zu", i);
		if (!json_is_object(v))
			return bad(p, "%s is not an object", what);
		int64_t seq, layer, k0;
		if (int_field(p, v, what, "seq", 0, INT64_MAX, &seq) || int_field(p, v, what, "layer", INT64_MIN, INT64_MAX, &layer) ||
		    int_field(p, v, what, "k0", 0, OEA_MAX_TOPK, &k0))
			return -1;
		const chunk_layer *L = NULL;
		for (size_t j = 0; j < ncl && !L; j++)
			if (cl[j].id == layer)
				L = &cl[j];
		if (!L)
			return bad(p, "%s names layer %" PRId64 ", which the chunk's \"layers\" do not describe", what, layer);
		const oeap_rec_layer *lay = &rec->layers[L->index];
		char name[64];
		snprintf(name, sizeof(name), "c%" PRId64 ".logits", seq);
		tensor *lg = role(p, t, nt, name, logit_types, -1, lay->experts, 2);
		if (!lg)
			return -1;
		snprintf(name, sizeof(name), "c%" PRId64 ".ids", seq);
		tensor *id = role(p, t, nt, name, id_types, lg->shape[0], lay->top_k, 2);
		if (!id)
			return -1;
		if (lg->shape[0] > OEA_MAX_ROWS)
			return bad(p, "%s has %" PRId64 " rows, more than liboea's %d", what, lg->shape[0], OEA_MAX_ROWS);
		oeap_rec_call c = {
			.seq = (uint64_t)seq,
			.layer = (uint32_t)L->index,
			.file = file,
			.rows = (int32_t)lg->shape[0],
			.k0 = (int32_t)k0,
			.logits_dtype = lg->dtype,
			.ids_dtype = id->dtype,
			.logits = data + lg->begin,
			.ids = data + id->begin,
			.bias = L->bias,
		};
		if (add_call(rec, &c))
			return oeap_fail(p->err, OEAP_ERR_INTERNAL, p->file, 0, "out of memory");
	}
	for (size_t j = 0; j < nt; j++)
		if (!t[j].used)
			return bad(p, "tensor \"%s\" belongs to no call and no layer", t[j].name);
	return 0;
}

/* A metadata string holding a JSON document (layers, calls) of the given type. */
static json_t *meta_json(const place *p, json_t *meta, const char *key, int want_array)
{
	json_t *s = json_object_get(meta, key);
	if (!json_is_string(s)) {
		bad(p, "__metadata__ has no \"%s\" string", key);
		return NULL;
	}
	json_error_t je;
	json_t *v = json_loadb(json_string_value(s), json_string_length(s), 0, &je);
	if (!v || (want_array ? !json_is_array(v) : !json_is_object(v))) {
		bad(p, "__metadata__ \"%s\" is not a JSON %s%s%s", key, want_array ? "array" : "object", v ? "" : ": ",
		    v ? "" : je.text);
		json_decref(v);
		return NULL;
	}
	return v;
}

static uint64_t meta_count(json_t *meta, const char *key)
{
	json_t *s = json_object_get(meta, key);
	if (!json_is_string(s))
		return 0;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(json_string_value(s), &end, 10);
	return errno || *end ? 0 : v;
}

/* Reads one complete chunk at data[0..avail): 0 and *len its size, 1 when it does not fit in avail (the
 * cut tail: *why says how), -1 on an error. */
static int read_chunk(const place *p, oeap_recording *rec, oeap_rec_file *f, uint32_t file, const unsigned char *data,
                      uint64_t avail, uint64_t *len, char *why, size_t whysz)
{
	if (avail < 8) {
		snprintf(why, whysz, "%" PRIu64 " bytes, too few for a chunk's length", avail);
		return 1;
	}
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | data[i];
	if (hlen > OEAP_RECORDING_MAX_HEADER)
		return bad(p, "a header of %" PRIu64 " bytes: more than %u MiB, so not a recording (or a damaged one)", hlen,
		           OEAP_RECORDING_MAX_HEADER >> 20);
	if (hlen > avail - 8) {
		snprintf(why, whysz, "its header announces %" PRIu64 " bytes, %" PRIu64 " follow", hlen, avail - 8);
		return 1;
	}
	json_error_t je;
	json_t *header = json_loadb((const char *)data + 8, hlen, JSON_REJECT_DUPLICATES, &je);
	if (!header || !json_is_object(header)) {
		json_decref(header);
		return bad(p, "the header is not a JSON object%s%s: not a safetensors file", header ? "" : ": ",
		           header ? "" : je.text);
	}
	int rc = -1;
	tensor *t = NULL;
	size_t nt = 0;
	chunk_layer *cl = NULL;
	size_t ncl = 0;
	json_t *layers = NULL, *calls = NULL;
	json_t *meta = json_object_get(header, "__metadata__");
	json_t *fmt = json_object_get(meta, "format"), *ver = json_object_get(meta, "version");
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), OEAP_RECORDING_FORMAT) != 0) {
		bad(p, "a safetensors file, but not an oeapatch routing recording (no __metadata__ format \"%s\": "
		       "another tool's file, a model's weights?)",
		    OEAP_RECORDING_FORMAT);
		goto done;
	}
	if (!json_is_string(ver) || strcmp(json_string_value(ver), OEAP_RECORDING_VERSION) != 0) {
		bad(p, "recording format version %s; this oeapatch reads version %s",
		    json_is_string(ver) ? json_string_value(ver) : "(none)", OEAP_RECORDING_VERSION);
		goto done;
	}
	uint64_t data_len = 0;
	if (read_tensors(p, header, &t, &nt, &data_len))
		goto done;
	if (data_len > avail - 8 - hlen) {
		snprintf(why, whysz, "its tensors take %" PRIu64 " bytes, %" PRIu64 " follow the header", data_len,
		         avail - 8 - hlen);
		rc = 1;
		goto done;
	}
	const unsigned char *body = data + 8 + hlen;
	if (!(layers = meta_json(p, meta, "layers", 0)) || !(calls = meta_json(p, meta, "calls", 1)))
		goto done;
	if (read_layers(p, rec, layers, t, nt, body, &cl, &ncl))
		goto done;
	size_t before = rec->ncalls;
	if (read_calls(p, rec, file, calls, t, nt, body, cl, ncl))
		goto done;
	f->calls += rec->ncalls - before;
	json_t *fw = json_object_get(meta, "framework");
	if (json_is_string(fw))
		snprintf(f->framework, sizeof(f->framework), "%s", json_string_value(fw));
	json_t *px = json_object_get(meta, "prefix");
	if (json_is_string(px))
		snprintf(f->prefix, sizeof(f->prefix), "%s", json_string_value(px));
	json_t *rk = json_object_get(meta, "rank");
	if (json_is_string(rk))
		f->rank = strtol(json_string_value(rk), NULL, 10);
	f->dropped = meta_count(meta, "dropped");
	f->graph_missed = meta_count(meta, "graph_missed");
	*len = 8 + hlen + data_len;
	rc = 0;
done:
	free(t);
	free(cl);
	json_decref(layers);
	json_decref(calls);
	json_decref(header);
	return rc;
}

static int add(oeap_recording *rec, const char *name, const unsigned char *data, size_t size, void *map,
               oeap_error *err)
{
	oeap_rec_file *nf = realloc(rec->files, (rec->nfiles + 1) * sizeof(*nf));
	if (!nf)
		return oeap_fail(err, OEAP_ERR_INTERNAL, name, 0, "out of memory");
	rec->files = nf;
	oeap_rec_file *f = &nf[rec->nfiles];
	memset(f, 0, sizeof(*f));
	f->rank = -1;
	if (!(f->path = strdup(name)))
		return oeap_fail(err, OEAP_ERR_INTERNAL, name, 0, "out of memory");
	size_t calls0 = rec->ncalls, layers0 = rec->nlayers, biases0 = rec->nbiases;
	uint64_t rows0 = rec->rows;
	place p = {name, 0, 0, err};
	uint64_t at = 0;
	while (at < size) {
		uint64_t len = 0;
		int r = read_chunk(&p, rec, f, (uint32_t)rec->nfiles, data + at, size - at, &len, f->cut_reason,
		                   sizeof(f->cut_reason));
		if (r < 0)
			goto fail;
		if (r > 0) {
			f->cut_bytes = size - at;
			break;
		}
		at += len;
		p.at = at;
		p.chunk = ++f->chunks;
	}
	if (!f->chunks) {
		if (size == 0)
			oeap_fail(err, OEAP_ERR_INPUT, name, 0, "empty: no chunk was ever written (a recording that never "
			                                        "saw a decode call, or another file)");
		else
			oeap_fail(err, OEAP_ERR_INPUT, name, 0, "no complete chunk: the first one was cut (%s)", f->cut_reason);
		goto fail;
	}
	f->map = map;
	f->map_size = size;
	rec->nfiles++;
	return 0;
fail:
	/* nothing of this file stays */
	for (size_t i = biases0; i < rec->nbiases; i++)
		free(rec->biases[i]);
	rec->nbiases = biases0;
	rec->ncalls = calls0;
	rec->nlayers = layers0;
	rec->rows = rows0;
	free(f->path);
	return -1;
}

int oeap_recording_add_bytes(oeap_recording *rec, const char *name, const unsigned char *data, size_t size,
                             oeap_error *err)
{
	return add(rec, name, data, size, NULL, err);
}

int oeap_recording_add_file(oeap_recording *rec, const char *path, oeap_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "%s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "not a regular file");
	}
	void *map = NULL;
	size_t size = (size_t)st.st_size;
	if (size && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		int e = errno;
		close(fd);
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot map it: %s", strerror(e));
	}
	close(fd);
	if (map)
		madvise(map, size, MADV_SEQUENTIAL);
	if (add(rec, path, map, size, map, err)) {
		if (map)
			munmap(map, size);
		return -1;
	}
	return 0;
}

void oeap_recording_free(oeap_recording *rec)
{
	for (size_t i = 0; i < rec->nfiles; i++) {
		if (rec->files[i].map)
			munmap(rec->files[i].map, rec->files[i].map_size);
		free(rec->files[i].path);
	}
	for (size_t i = 0; i < rec->nbiases; i++)
		free(rec->biases[i]);
	free(rec->biases);
	free(rec->files);
	free(rec->layers);
	free(rec->calls);
	memset(rec, 0, sizeof(*rec));
}
