/*
 * gpu.h - GPU readiness: whether the liboea a server will load can run on
 * this machine's NVIDIA GPUs. A CPU-only liboea, or a fat binary without
 * code for a GPU's architecture (and no PTX the driver can compile for it),
 * passes every other check, and the binding then stops the server at its
 * first CUDA call (STRICT) or routes nothing.
 *
 * Where the facts come from (docs/runtime.md, "GPU readiness"):
 *   - NVIDIA devices: the driver's /proc/driver/nvidia/gpus/<PCI address>/
 *     folders and the /dev/nvidia<N> device files. Their `information`
 *     file gives the model, IRQ, BIOS and bus, not the compute capability;
 *   - each GPU's compute capability: NVML (libnvidia-ml.so.1, installed
 *     with the driver; nvmlDeviceGetCudaComputeCapability creates no CUDA
 *     context), loaded with dlopen: oeapatch links nothing of CUDA;
 *   - the library's code: the ELF section .nv_fatbin of its file, whose fat
 *     binary entries each name their kind (SASS cubin or PTX) and SM.
 *
 * For tests only: OEAPATCH_TEST_NVIDIA_ROOT=DIR reads DIR/proc/driver/
 * nvidia/gpus and DIR/dev instead of the machine's, and NVML is then not
 * asked: OEAPATCH_TEST_NVIDIA_CC ("9.0,8.6": one per GPU, in PCI order)
 * gives the compute capabilities, unset leaves them unknown.
 */
#ifndef OEAP_GPU_H
#define OEAP_GPU_H

#include <stddef.h>

#include "pipeline.h"

#define OEAP_GPU_MAX 64
#define OEAP_FATBIN_MAX 64

typedef struct oeap_gpus {
	size_t n;                    /* NVIDIA GPUs found (0: none, the check does not apply) */
	char bus[OEAP_GPU_MAX][64];  /* PCI address from /proc, or "/dev/nvidiaN" */
	int sm[OEAP_GPU_MAX];        /* compute capability as major*10+minor; 0: unknown */
	char why_unknown[256];       /* why the capabilities are unknown, when they are */
} oeap_gpus;

typedef struct oeap_fatbin {
	int found;                   /* the file has a .nv_fatbin section with at least one entry */
	size_t nsass, nptx;
	int sass[OEAP_FATBIN_MAX];   /* SM of each cubin (90: sm_90), duplicates dropped */
	int ptx[OEAP_FATBIN_MAX];    /* SM of each PTX entry (compute_90) */
} oeap_fatbin;

/* The NVIDIA GPUs of this machine (or of OEAPATCH_TEST_NVIDIA_ROOT), with their capabilities. */
void oeap_gpus_find(oeap_gpus *out);

/* Reads the fat binary of the ELF file `path`; -1 with `why` set when the file cannot be read as ELF. */
int oeap_fatbin_read(const char *path, oeap_fatbin *out, char *why, size_t cap);

/*
 * Whether `fb` has code for SM `sm`: a cubin of the same major version and
 * a minor at most the GPU's (cubins run on later minors of their major),
 * or PTX of an SM at most the GPU's (the driver compiles it at load).
 */
int oeap_fatbin_runs_on(const oeap_fatbin *fb, int sm);

/*
 * Adds the check "gpu" to `rep` when this machine has NVIDIA GPUs: the
 * library `library` (a path, or a bare name the loader finds) must hold
 * code for each of them. A mismatch fails while `oea_on` (the start's
 * outcome: startup.h) and is a warning while off; unknown capabilities
 * are a warning. Returns -1 only when memory ran out.
 */
int oeap_gpu_verify(const char *library, int oea_on, const char *switch_name, oeap_report *rep);

#endif
