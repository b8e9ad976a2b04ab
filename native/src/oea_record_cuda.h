/*
 * oea_record_cuda.h - the recorder's CUDA glue (oea_record_cuda.cu), private
 * to liboea. Without CUDA, oea_record.c defines stubs that answer -1.
 * Every function takes the device the pointers belong to and makes it the
 * current one of liboea's runtime for the call.
 */
#ifndef OEA_RECORD_CUDA_H
#define OEA_RECORD_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One strided device-to-host copy (cudaMemcpy2DAsync's arguments). */
typedef struct oea_rec_copy {
	void *dst;
	size_t dpitch;
	const void *src;
	size_t spitch;
	size_t width;
	size_t height;
} oea_rec_copy;

/* 1: `stream` is being captured into a CUDA graph; 0: it is not; -1: error. */
int oea_rec_cuda_capturing(int device, void *stream);
/* Page-locks host memory [buf, buf + bytes) so that copies into it are asynchronous: 0 or -1. */
int oea_rec_cuda_pin(void *buf, size_t bytes);
void oea_rec_cuda_unpin(void *buf);
/* The copies on `stream`, then *event recorded after them (created when NULL): 0 or -1. */
int oea_rec_cuda_enqueue(int device, void *stream, const oea_rec_copy *copies, int count,
                         void **event);
/* Waits until the event's copies are done: 0 or -1. */
int oea_rec_cuda_wait(void *event);
void oea_rec_cuda_event_free(void *event);
/* The last CUDA error's text, for the stopped reason. */
const char *oea_rec_cuda_error(void);

#ifdef __cplusplus
}
#endif

#endif /* OEA_RECORD_CUDA_H */
