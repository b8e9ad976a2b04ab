/*
 * oea_record.c - the routing recorder (include/oea_record.h says what and
 * why; oeapatch's docs/recording.md is the file format).
 *
 * The queue: a ring of bytes holding each call's rows (logits, then ids, each
 * padded to 8 bytes; on CUDA the valid-row count after them) and a ring of
 * entries describing the calls, both positions counted monotonically. The
 * caller reserves, copies and publishes under the mutex; the writer holds the
 * mutex only to take a run of entries and, once they are written, to release
 * their bytes, so neither side ever waits for the other's work. A call whose
 * rows do not fit is dropped and counted.
 *
 * A chunk is assembled in the writer's own buffers (header text, data) and
 * appended with one writev, so a crash or a full disk can only cut the chunk
 * being written, which the reader tolerates at the end of a file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "oea.h"
#include "oea_record.h"
#include "oea_record_cuda.h"
#include "oea_row.h" /* oea_dtype_size */

#define ENTRIES 4096u     /* calls queued at most (a power of two) */
#define MAX_LAYERS 4096   /* layer configurations per recorder */
#define IDLE_FLUSH_S 1    /* a quiet server's calls reach the disk within a second */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL: faults stay lazy */
#endif

struct rec_layer {
	int32_t number, experts, columns, logits_dtype, ids_dtype;
	size_t logits_row, ids_row; /* bytes per row */
	char *settings;             /* the JSON object, escaped for a metadata string */
	float *bias;                /* experts floats, or NULL */
	uint64_t in_chunk;          /* writer only: 1 + the chunk that last described it */
};

struct rec_entry {
	uint64_t start, bytes, seq;
	int32_t layer, k0, rows;
	int32_t valid;       /* rows to record; -1: read the count after the rows (CUDA) */
	int32_t valid_dtype; /* of that count */
	int32_t cuda;        /* an event follows the copies */
};

struct oea_rec {
	pthread_mutex_t mu;
	pthread_cond_t work; /* the writer's: a chunk's worth queued, or closing */
	pthread_cond_t done; /* close's: the writer finished */
	pthread_t thread;
	int fd;
	uint8_t *ring;
	uint64_t ring_bytes, chunk_bytes, cap_bytes;
	uint64_t head, tail;   /* byte positions: next free, oldest held */
	uint64_t ehead, etail; /* entry positions */
	struct rec_entry entries[ENTRIES];
	void *events[ENTRIES]; /* CUDA events, made at an entry's first CUDA call */
	struct rec_layer *layers[MAX_LAYERS];
	int32_t nlayers;
	int pinned; /* 1: ring page-locked; -1: pinning failed */
	uint64_t file_bytes; /* the writer's: bytes in the file (fig.written is its copy) */
	int waiting, closing, finished;
	unsigned generation; /* fork_generation when opened (see inherited()) */
	uint64_t seq;
	oea_rec_figures fig;
	char *meta; /* the metadata's fixed part: "framework":"..",.."rank":".." */
	/* the writer's buffers */
	char *hdr, *calls, *lays;
	size_t hdr_len, hdr_cap, calls_len, calls_cap, lays_len, lays_cap;
	uint8_t *data;
	size_t data_len, data_cap;
};

#ifndef OEA_WITH_CUDA
int oea_rec_cuda_capturing(int device, void *stream) { (void)device; (void)stream; return -1; }
int oea_rec_cuda_pin(void *buf, size_t bytes) { (void)buf; (void)bytes; return -1; }
void oea_rec_cuda_unpin(void *buf) { (void)buf; }
int oea_rec_cuda_enqueue(int device, void *stream, const oea_rec_copy *copies, int count,
                         void **event)
{
	(void)device, (void)stream, (void)copies, (void)count, (void)event;
	return -1;
}
int oea_rec_cuda_wait(void *event) { (void)event; return -1; }
void oea_rec_cuda_event_free(void *event) { (void)event; }
const char *oea_rec_cuda_error(void) { return "liboea was not built with CUDA"; }
#endif

static const char *dtype_name(int32_t dtype)
{
	static const char *const names[] = {"F32", "BF16", "F16", "I32", "I64"};
	return dtype >= 0 && dtype <= OEA_DTYPE_I64 ? names[dtype] : "?";
}

static uint64_t align8(uint64_t n) { return (n + 7u) & ~(uint64_t)7u; }

/* A chunk is due (mutex held): a chunk's worth of bytes queued, or half the
 * entries (small calls: 1-row batches fill the entries before the bytes). */
static int due(const oea_rec *rec)
{
	return rec->head - rec->tail >= rec->chunk_bytes || rec->ehead - rec->etail >= ENTRIES / 2;
}

/* ---- growable buffers (the writer's; a failed growth stops the recorder) */

static int grow(void **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int put(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(*s ? *s + *len : NULL, *s ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -1;
		if (*s && *len + (size_t)n < *cap) {
			*len += (size_t)n;
			return 0;
		}
		if (grow((void **)s, cap, *len + (size_t)n + 1))
			return -1;
	}
}

/* `text` as the inside of a JSON string (what a metadata value holding JSON needs). */
static char *escaped(const char *text)
{
	size_t n = 0;
	for (const char *c = text; *c; c++)
		n += (*c == '"' || *c == '\\') ? 2 : ((unsigned char)*c < 0x20 ? 6 : 1);
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		if (*c == '"' || *c == '\\') {
			*o++ = '\\';
			*o++ = (char)*c;
		} else if (*c < 0x20) {
			o += sprintf(o, "\\u%04x", *c);
		} else {
			*o++ = (char)*c;
		}
	}
	*o = 0;
	return out;
}

/* ---- the caller's side */

static void *writer(void *arg);

/* Stops for good (mutex held): the reason is kept, what is queued is dropped. */
static void stop_locked(oea_rec *rec, const char *fmt, ...)
{
	if (!rec->fig.stopped[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(rec->fig.stopped, sizeof rec->fig.stopped, fmt, ap);
		va_end(ap);
	}
}

/* Forks. A child process inherits every recorder as memory only: not its
 * writer thread, and its mutex in whatever state the parent's threads left it
 * (held by the writer at the fork: held for ever). Locking it or waiting for
 * the writer there would hang the child, and calls queued there would never
 * be written (nor should they be: the file is the parent's). So a child's
 * calls on an inherited recorder are dropped without the lock, its figures
 * are the copy's, and closing it frees the copy (the parent's file and writer
 * are untouched). A process that forks bumps fork_generation in the child
 * (pthread_atfork, which glibc also removes when liboea is unloaded); a
 * recorder whose generation differs was inherited. */
static atomic_uint fork_generation;
static pthread_once_t fork_watch = PTHREAD_ONCE_INIT;

static void forked_child(void) { atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed); }
static void watch_forks(void) { pthread_atfork(NULL, NULL, forked_child); }

static int inherited(const oea_rec *rec)
{
	return rec->generation != atomic_load_explicit(&fork_generation, memory_order_relaxed);
}

oea_rec *oea_rec_open(int fd, const char *framework, const char *prefix, int32_t rank,
                      uint64_t ring_bytes, uint64_t chunk_bytes, uint64_t cap_bytes)
{
	oea_rec *rec = NULL;
	int err = EINVAL;
	if (fd < 0 || !framework || !prefix || ring_bytes < (1u << 20) || ring_bytes > ((uint64_t)1 << 40))
		goto fail;
	err = ENOMEM;
	rec = calloc(1, sizeof *rec);
	if (!rec)
		goto fail;
	pthread_once(&fork_watch, watch_forks);
	rec->generation = atomic_load_explicit(&fork_generation, memory_order_relaxed);
	rec->fd = fd;
	rec->ring_bytes = align8(ring_bytes);
	/* at most half the ring per chunk, so the callers keep room while one is written */
	rec->chunk_bytes = chunk_bytes ? (chunk_bytes < rec->ring_bytes / 2 ? chunk_bytes : rec->ring_bytes / 2) : 1;
	rec->cap_bytes = cap_bytes;
	/* anonymous memory the writer pre-faults (below): the first lap round the
	 * ring would otherwise take a page fault every 4 KiB in the caller */
	rec->ring = mmap(NULL, rec->ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rec->ring == MAP_FAILED)
		rec->ring = NULL;
	char *fw = escaped(framework), *px = escaped(prefix);
	size_t mlen = 0, mcap = 0;
	if (rec->ring && fw && px)
		put(&rec->meta, &mlen, &mcap, "\"framework\":\"%s\",\"prefix\":\"%s\",\"rank\":\"%d\"", fw,
		    px, (int)rank);
	free(fw);
	free(px);
	if (!rec->ring || !rec->meta)
		goto fail;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&rec->mu, NULL);
	pthread_cond_init(&rec->work, &ca);
	pthread_cond_init(&rec->done, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&rec->thread, NULL, writer, rec);
	if (err) {
		pthread_cond_destroy(&rec->work);
		pthread_cond_destroy(&rec->done);
		pthread_mutex_destroy(&rec->mu);
		goto fail;
	}
	return rec;
fail:
	if (rec) {
		if (rec->ring)
			munmap(rec->ring, rec->ring_bytes);
		free(rec->meta);
		free(rec);
	}
	if (fd >= 0)
		close(fd);
	errno = err;
	return NULL;
}

int32_t oea_rec_layer(oea_rec *rec, int32_t number, const char *settings_json, const float *bias,
                      int32_t experts, int32_t columns, int32_t logits_dtype, int32_t ids_dtype)
{
	if (!rec || !settings_json)
		return -OEA_ERR_NULL_ARGUMENT;
	if (inherited(rec))
		return -OEA_ERR_INVALID_ARGUMENT;
	if (experts < 1 || experts > OEA_MAX_EXPERTS || columns < 1 || columns > OEA_MAX_TOPK)
		return -OEA_ERR_SHAPE;
	if (logits_dtype < OEA_DTYPE_F32 || logits_dtype > OEA_DTYPE_F16 ||
	    (ids_dtype != OEA_DTYPE_I32 && ids_dtype != OEA_DTYPE_I64))
		return -OEA_ERR_DTYPE;
	struct rec_layer *l = calloc(1, sizeof *l);
	if (!l)
		return -OEA_ERR_INVALID_ARGUMENT;
	l->number = number;
	l->experts = experts;
	l->columns = columns;
	l->logits_dtype = logits_dtype;
	l->ids_dtype = ids_dtype;
	l->logits_row = (size_t)experts * oea_dtype_size(logits_dtype);
	l->ids_row = (size_t)columns * oea_dtype_size(ids_dtype);
	l->settings = escaped(settings_json);
	if (bias && (l->bias = malloc((size_t)experts * sizeof(float))))
		memcpy(l->bias, bias, (size_t)experts * sizeof(float));
	if (!l->settings || (bias && !l->bias)) {
		free(l->settings);
		free(l->bias);
		free(l);
		return -OEA_ERR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&rec->mu);
	int32_t h = rec->nlayers < MAX_LAYERS ? rec->nlayers++ : -1;
	if (h >= 0)
		rec->layers[h] = l;
	pthread_mutex_unlock(&rec->mu);
	if (h < 0) {
		free(l->settings);
		free(l->bias);
		free(l);
		return -OEA_ERR_INVALID_ARGUMENT;
	}
	return h;
}

/* Room for `bytes` in the ring (mutex held): its position, or UINT64_MAX. */
static uint64_t reserve(oea_rec *rec, uint64_t bytes)
{
	if (rec->ehead - rec->etail >= ENTRIES || bytes > rec->ring_bytes)
		return UINT64_MAX;
	uint64_t at = rec->head, off = at % rec->ring_bytes;
	if (off + bytes > rec->ring_bytes)
		at += rec->ring_bytes - off; /* never split: skip the ring's end */
	if (at + bytes - rec->tail > rec->ring_bytes)
		return UINT64_MAX;
	return at;
}

static int64_t read_count(const void *p, int32_t dtype)
{
	if (dtype == OEA_DTYPE_I64) {
		int64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void copy_rows(uint8_t *dst, const uint8_t *src, size_t row, size_t stride, int32_t rows)
{
	if (stride == row)
		memcpy(dst, src, row * (size_t)rows);
	else
		for (int32_t r = 0; r < rows; r++)
			memcpy(dst + row * (size_t)r, src + stride * (size_t)r, row);
}

int oea_rec_call(oea_rec *rec, const oea_rec_args *a)
{
	if (!rec || !a)
		return -OEA_ERR_NULL_ARGUMENT;
	int32_t layer = a->layer, k0 = a->k0, n = a->n, experts = a->experts, columns = a->columns;
	int32_t valid_dtype = a->valid_dtype, device = a->device;
	const void *logits = a->logits, *ids = a->ids, *valid_ptr = a->valid_ptr;
	int64_t logits_row_stride = a->logits_row_stride, ids_row_stride = a->ids_row_stride;
	int64_t valid_rows = a->valid_rows;
	void *stream = a->stream;
	if (n < 0 || n > OEA_MAX_ROWS)
		return -OEA_ERR_SHAPE;
	if (n > 0 && (!logits || !ids))
		return -OEA_ERR_NULL_ARGUMENT;
	if (valid_ptr && valid_dtype != OEA_DTYPE_I32 && valid_dtype != OEA_DTYPE_I64)
		return -OEA_ERR_DTYPE;
	if (a->reserved)
		return -OEA_ERR_INVALID_ARGUMENT;
	if (inherited(rec))
		return OEA_REC_DROPPED; /* not counted: the figures are the parent's */
	pthread_mutex_lock(&rec->mu);
	const struct rec_layer *l = layer >= 0 && layer < rec->nlayers ? rec->layers[layer] : NULL;
	int rc = OEA_REC_DROPPED;
	if (!l || l->experts != experts || l->columns != columns) {
		rc = -(l ? OEA_ERR_SHAPE : OEA_ERR_INVALID_ARGUMENT);
		goto out;
	}
	if (n > 1 && (logits_row_stride < experts || ids_row_stride < columns)) {
		rc = -OEA_ERR_STRIDE;
		goto out;
	}
	uint64_t seq = rec->seq++;
	rec->fig.calls++;
	if (rec->fig.stopped[0] || rec->closing)
		goto drop;
	if (device >= 0) {
		int capturing = oea_rec_cuda_capturing(device, stream);
		if (capturing == 1) {
			rec->fig.graph_missed++;
			rc = OEA_REC_CAPTURING;
			goto out;
		}
		if (capturing == 0 && !rec->pinned)
			rec->pinned = oea_rec_cuda_pin(rec->ring, rec->ring_bytes) ? -1 : 1;
		if (capturing < 0 || rec->pinned < 0) {
			/* pageable memory would make every copy wait for the GPU: stop instead */
			stop_locked(rec, "cannot copy CUDA tensors: %s", oea_rec_cuda_error());
			goto drop;
		}
	}
	int32_t rows = n, valid = n;
	if (valid_ptr && device < 0) {
		int64_t v = read_count(valid_ptr, valid_dtype);
		valid = v < 0 ? 0 : (int32_t)(v < n ? v : n);
	} else if (valid_ptr) {
		valid = -1; /* read on the host once the copy is done */
	} else if (valid_rows >= 0) {
		valid = (int32_t)(valid_rows < n ? valid_rows : n);
	}
	if (device < 0)
		rows = valid;
	uint64_t lbytes = align8(l->logits_row * (size_t)rows), ibytes = align8(l->ids_row * (size_t)rows);
	uint64_t bytes = lbytes + ibytes + (valid < 0 ? 8 : 0);
	uint64_t at = reserve(rec, bytes ? bytes : 8);
	if (at == UINT64_MAX)
		goto drop;
	uint8_t *dst = rec->ring + at % rec->ring_bytes;
	unsigned slot = (unsigned)(rec->ehead % ENTRIES);
	size_t lsz = oea_dtype_size(l->logits_dtype), isz = oea_dtype_size(l->ids_dtype);
	if (device < 0) {
		copy_rows(dst, logits, l->logits_row, (size_t)logits_row_stride * lsz, rows);
		copy_rows(dst + lbytes, ids, l->ids_row, (size_t)ids_row_stride * isz, rows);
	} else {
		oea_rec_copy copies[3] = {
			{dst, l->logits_row, logits, (size_t)logits_row_stride * lsz, l->logits_row, (size_t)rows},
			{dst + lbytes, l->ids_row, ids, (size_t)ids_row_stride * isz, l->ids_row, (size_t)rows},
			{dst + lbytes + ibytes, 8, valid_ptr, 8, oea_dtype_size(valid_dtype), 1},
		};
		if (rows <= 1) /* one row: its stride is not the copy's pitch */
			copies[0].spitch = copies[0].width, copies[1].spitch = copies[1].width;
		if (oea_rec_cuda_enqueue(device, stream, copies, valid < 0 ? 3 : 2, &rec->events[slot])) {
			stop_locked(rec, "cannot copy CUDA tensors: %s", oea_rec_cuda_error());
			goto drop;
		}
	}
	rec->entries[slot] = (struct rec_entry){at, bytes ? bytes : 8, seq, layer, k0, rows, valid,
	                                        valid_dtype, device >= 0};
	rec->head = at + (bytes ? bytes : 8);
	rec->ehead++;
	if (rec->waiting && due(rec))
		pthread_cond_signal(&rec->work);
	rc = OEA_REC_QUEUED;
	goto out;
drop:
	rec->fig.dropped++;
	rc = OEA_REC_DROPPED;
out:
	pthread_mutex_unlock(&rec->mu);
	return rc;
}

void oea_rec_figures_get(oea_rec *rec, oea_rec_figures *out)
{
	if (inherited(rec)) {
		*out = rec->fig; /* the copy: nothing in this process changes it */
		return;
	}
	pthread_mutex_lock(&rec->mu);
	*out = rec->fig;
	pthread_mutex_unlock(&rec->mu);
}

/* ---- the writer */

static int add_data(oea_rec *rec, const void *p, size_t n)
{
	if (grow((void **)&rec->data, &rec->data_cap, rec->data_len + n))
		return -1;
	memcpy(rec->data + rec->data_len, p, n);
	rec->data_len += n;
	return 0;
}

/* One tensor into the chunk: its header entry and its bytes. */
static int add_tensor(oea_rec *rec, const char *name, int32_t dtype, int64_t d0, int64_t d1,
                      const void *p, size_t n)
{
	size_t at = rec->data_len;
	int rc = put(&rec->hdr, &rec->hdr_len, &rec->hdr_cap, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", name,
	             dtype_name(dtype), (long long)d0);
	if (!rc && d1 >= 0)
		rc = put(&rec->hdr, &rec->hdr_len, &rec->hdr_cap, ",%lld", (long long)d1);
	if (!rc)
		rc = put(&rec->hdr, &rec->hdr_len, &rec->hdr_cap, "],\"data_offsets\":[%zu,%zu]}", at, at + n);
	return rc ? rc : add_data(rec, p, n);
}

static int write_all(int fd, struct iovec *iov, int count)
{
	while (count > 0) {
		ssize_t done = writev(fd, iov, count);
		if (done < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (count > 0 && (size_t)done >= iov->iov_len) {
			done -= (ssize_t)iov->iov_len;
			iov++, count--;
		}
		if (count > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= (size_t)done;
		}
	}
	return 0;
}

/* Writes entries [from, from + count) as one chunk (mutex not held). Returns
 * 0, or -1 with the reason in `why` (the recorder stops). */
static int write_chunk(oea_rec *rec, uint64_t from, uint64_t count, uint64_t chunk, uint64_t dropped,
                       uint64_t graph_missed, char *why, size_t why_len)
{
	rec->hdr_len = rec->calls_len = rec->lays_len = rec->data_len = 0;
	int rc = put(&rec->hdr, &rec->hdr_len, &rec->hdr_cap, "%s", "");
	rc |= put(&rec->calls, &rec->calls_len, &rec->calls_cap, "%s", "[");
	rc |= put(&rec->lays, &rec->lays_len, &rec->lays_cap, "%s", "{");
	for (uint64_t i = 0; !rc && i < count; i++) {
		const struct rec_entry *e = &rec->entries[(from + i) % ENTRIES];
		struct rec_layer *l = rec->layers[e->layer];
		const uint8_t *src = rec->ring + e->start % rec->ring_bytes;
		if (e->cuda && oea_rec_cuda_wait(rec->events[(from + i) % ENTRIES])) {
			snprintf(why, why_len, "cannot copy CUDA tensors: %s", oea_rec_cuda_error());
			return -1;
		}
		int64_t rows = e->valid;
		if (rows < 0) {
			uint64_t lb = align8(l->logits_row * (size_t)e->rows), ib = align8(l->ids_row * (size_t)e->rows);
			rows = read_count(src + lb + ib, e->valid_dtype);
			rows = rows < 0 ? 0 : (rows > e->rows ? e->rows : rows);
		}
		char name[48];
		if (l->in_chunk != chunk + 1) {
			l->in_chunk = chunk + 1;
			rc |= put(&rec->lays, &rec->lays_len, &rec->lays_cap, "%s\\\"%d\\\":%s",
			          rec->lays_len > 1 ? "," : "", (int)l->number, l->settings);
			if (l->bias) {
				snprintf(name, sizeof name, "l%d.bias", (int)l->number);
				rc |= add_tensor(rec, name, OEA_DTYPE_F32, l->experts, -1, l->bias,
				                 (size_t)l->experts * sizeof(float));
			}
		}
		rc |= put(&rec->calls, &rec->calls_len, &rec->calls_cap,
		          "%s{\\\"seq\\\":%llu,\\\"layer\\\":%d,\\\"k0\\\":%d}", i ? "," : "",
		          (unsigned long long)e->seq, (int)l->number, (int)e->k0);
		snprintf(name, sizeof name, "c%llu.logits", (unsigned long long)e->seq);
		rc |= add_tensor(rec, name, l->logits_dtype, rows, l->experts, src, l->logits_row * (size_t)rows);
		snprintf(name, sizeof name, "c%llu.ids", (unsigned long long)e->seq);
		rc |= add_tensor(rec, name, l->ids_dtype, rows, l->columns,
		                 src + align8(l->logits_row * (size_t)e->rows), l->ids_row * (size_t)rows);
	}
	/* the header: metadata first, then the tensors' entries gathered above */
	char *head = NULL;
	size_t head_len = 0, head_cap = 0;
	if (!rc)
		rc = put(&head, &head_len, &head_cap,
		         "........{\"__metadata__\":{\"format\":\"oeapatch-routing\",\"version\":\"1\",%s,"
		         "\"chunk\":\"%llu\",\"dropped\":\"%llu\",\"graph_missed\":\"%llu\",\"layers\":\"%.*s}\","
		         "\"calls\":\"%.*s]\"}%.*s}",
		         rec->meta, (unsigned long long)chunk, (unsigned long long)dropped,
		         (unsigned long long)graph_missed, (int)rec->lays_len, rec->lays, (int)rec->calls_len,
		         rec->calls, (int)rec->hdr_len, rec->hdr);
	/* the data starts 8-aligned, as safetensors writes it */
	while (!rc && head_len % 8)
		rc = put(&head, &head_len, &head_cap, " ");
	if (rc) {
		free(head);
		snprintf(why, why_len, "out of memory encoding a chunk");
		return -1;
	}
	uint64_t n = head_len - 8;
	for (int b = 0; b < 8; b++)
		head[b] = (char)(n >> (8 * b) & 0xff);
	uint64_t total = head_len + rec->data_len;
	if (rec->cap_bytes && rec->file_bytes + total > rec->cap_bytes) {
		free(head);
		snprintf(why, why_len, "the size cap of %llu bytes is reached", (unsigned long long)rec->cap_bytes);
		return -1;
	}
	struct iovec iov[2] = {{head, head_len}, {rec->data, rec->data_len}};
	rc = write_all(rec->fd, iov, rec->data_len ? 2 : 1);
	int err = errno;
	free(head);
	if (rc) {
		/* the chunk may be cut, which the reader tolerates at the end; nothing follows it */
		snprintf(why, why_len, "cannot write the file: %s", strerror(err));
		return -1;
	}
	rec->file_bytes += total;
	return 0;
}

static void *writer(void *arg)
{
	oea_rec *rec = arg;
	/* Page tables for the whole ring, off the forward's thread; it changes no
	 * byte, so callers may already be writing into the ring meanwhile. */
	madvise(rec->ring, rec->ring_bytes, MADV_POPULATE_WRITE);
	pthread_mutex_lock(&rec->mu);
	for (;;) {
		while (!rec->closing && !due(rec)) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			t.tv_sec += IDLE_FLUSH_S;
			rec->waiting = 1;
			int r = pthread_cond_timedwait(&rec->work, &rec->mu, &t);
			rec->waiting = 0;
			if (r == ETIMEDOUT)
				break;
		}
		if (rec->etail == rec->ehead) {
			if (rec->closing)
				break;
			continue;
		}
		/* a chunk's worth of calls, oldest first */
		uint64_t from = rec->etail, count = 0, bytes = 0;
		while (from + count < rec->ehead && (count == 0 || bytes < rec->chunk_bytes))
			bytes += rec->entries[(from + count++) % ENTRIES].bytes;
		uint64_t chunk = rec->fig.chunks, dropped = rec->fig.dropped, missed = rec->fig.graph_missed;
		int stopped = rec->fig.stopped[0] != 0;
		pthread_mutex_unlock(&rec->mu);

		char why[sizeof rec->fig.stopped] = "";
		int rc = 0;
		if (!stopped) {
			rc = write_chunk(rec, from, count, chunk, dropped, missed, why, sizeof why);
		} else {
			for (uint64_t i = 0; i < count; i++) /* the copies must land before the bytes are reused */
				if (rec->entries[(from + i) % ENTRIES].cuda)
					oea_rec_cuda_wait(rec->events[(from + i) % ENTRIES]);
		}

		pthread_mutex_lock(&rec->mu);
		if (stopped || rc) {
			if (rc)
				stop_locked(rec, "%s", why);
			rec->fig.dropped += count;
		} else {
			rec->fig.recorded += count;
			rec->fig.chunks++;
			rec->fig.written = rec->file_bytes;
		}
		rec->etail = from + count;
		const struct rec_entry *last = &rec->entries[(from + count - 1) % ENTRIES];
		rec->tail = last->start + last->bytes;
	}
	rec->finished = 1;
	pthread_cond_broadcast(&rec->done);
	pthread_mutex_unlock(&rec->mu);
	return NULL;
}

/* The recorder's memory (layers, ring, buffers, itself): close's last step. */
static void free_memory(oea_rec *rec)
{
	for (int32_t i = 0; i < rec->nlayers; i++) {
		if (!rec->layers[i])
			continue; /* a child's copy forked inside oea_rec_layer */
		free(rec->layers[i]->settings);
		free(rec->layers[i]->bias);
		free(rec->layers[i]);
	}
	munmap(rec->ring, rec->ring_bytes);
	free(rec->meta);
	free(rec->hdr);
	free(rec->calls);
	free(rec->lays);
	free(rec->data);
	free(rec);
}

int oea_rec_close(oea_rec *rec, int32_t timeout_ms, oea_rec_figures *last)
{
	if (!rec)
		return 0;
	if (inherited(rec)) {
		/* the child's copy: its descriptor and memory; no lock, no writer, no CUDA */
		if (last)
			*last = rec->fig;
		close(rec->fd);
		free_memory(rec);
		return 0;
	}
	pthread_mutex_lock(&rec->mu);
	rec->closing = 1;
	pthread_cond_signal(&rec->work);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += timeout_ms / 1000;
	t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L)
		t.tv_sec++, t.tv_nsec -= 1000000000L;
	while (!rec->finished)
		if (pthread_cond_timedwait(&rec->done, &rec->mu, &t) == ETIMEDOUT)
			break;
	int finished = rec->finished;
	if (last)
		*last = rec->fig;
	pthread_mutex_unlock(&rec->mu);
	if (!finished)
		return 1;
	pthread_join(rec->thread, NULL);
	close(rec->fd);
	if (rec->pinned > 0)
		oea_rec_cuda_unpin(rec->ring);
	for (unsigned i = 0; i < ENTRIES; i++)
		oea_rec_cuda_event_free(rec->events[i]);
	pthread_cond_destroy(&rec->work);
	pthread_cond_destroy(&rec->done);
	pthread_mutex_destroy(&rec->mu);
	free_memory(rec);
	return 0;
}
