/*
 * oea_record_cuda.cu - the recorder's device-to-host copies (oea_record.c
 * does the rest). No kernel: runtime calls only, on the caller's stream, so
 * the forward never waits for them; the writer thread waits on the event.
 */
#include <cuda_runtime.h>

#include "oea_record_cuda.h"

static __thread cudaError_t last_error = cudaSuccess;

/* Makes `device` current for liboea's runtime; returns the previous one (-1: error). */
static int enter(int device)
{
	int prev = -1;
	cudaError_t e = cudaGetDevice(&prev);
	if (e == cudaSuccess && prev != device)
		e = cudaSetDevice(device);
	if (e != cudaSuccess) {
		last_error = e;
		return -1;
	}
	return prev;
}

static void leave(int device, int prev)
{
	if (prev >= 0 && prev != device)
		cudaSetDevice(prev);
}

extern "C" int oea_rec_cuda_capturing(int device, void *stream)
{
	int prev = enter(device);
	if (prev < 0)
		return -1;
	cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
	cudaError_t e = cudaStreamIsCapturing((cudaStream_t)stream, &status);
	leave(device, prev);
	if (e != cudaSuccess) {
		last_error = e;
		return -1;
	}
	return status != cudaStreamCaptureStatusNone;
}

extern "C" int oea_rec_cuda_pin(void *buf, size_t bytes)
{
	cudaError_t e = cudaHostRegister(buf, bytes, cudaHostRegisterPortable);
	if (e != cudaSuccess) {
		last_error = e;
		return -1;
	}
	return 0;
}

extern "C" void oea_rec_cuda_unpin(void *buf)
{
	cudaHostUnregister(buf);
}

extern "C" int oea_rec_cuda_enqueue(int device, void *stream, const oea_rec_copy *copies,
                                    int count, void **event)
{
	int prev = enter(device);
	if (prev < 0)
		return -1;
	cudaError_t e = cudaSuccess;
	if (!*event) {
		cudaEvent_t ev;
		e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
		if (e == cudaSuccess)
			*event = (void *)ev;
	}
	for (int i = 0; e == cudaSuccess && i < count; i++) {
		const oea_rec_copy *c = &copies[i];
		if (c->width && c->height)
			e = cudaMemcpy2DAsync(c->dst, c->dpitch, c->src, c->spitch, c->width, c->height,
			                      cudaMemcpyDeviceToHost, (cudaStream_t)stream);
	}
	if (e == cudaSuccess)
		e = cudaEventRecord((cudaEvent_t)*event, (cudaStream_t)stream);
	leave(device, prev);
	if (e != cudaSuccess) {
		last_error = e;
		return -1;
	}
	return 0;
}

extern "C" int oea_rec_cuda_wait(void *event)
{
	cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
	if (e != cudaSuccess) {
		last_error = e;
		return -1;
	}
	return 0;
}

extern "C" void oea_rec_cuda_event_free(void *event)
{
	if (event)
		cudaEventDestroy((cudaEvent_t)event);
}

extern "C" const char *oea_rec_cuda_error(void)
{
	return cudaGetErrorString(last_error);
}
