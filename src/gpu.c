/*
 * gpu.c - GPU readiness (gpu.h).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "gpu.h"

/* ------------------------------------------------------------ the devices */

static int by_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* "9.0,8.6" -> 90, 86 (tests only: gpu.h). */
static void test_capabilities(oeap_gpus *out, const char *list)
{
	size_t i = 0;
	for (const char *p = list; p && *p && i < out->n; i++) {
		int major = 0, minor = 0, used = 0;
		if (sscanf(p, "%d.%d%n", &major, &minor, &used) != 2 || major < 1 || minor < 0 || minor > 9)
			break;
		out->sm[i] = major * 10 + minor;
		p += used;
		p += *p == ',';
	}
	if (i < out->n)
		snprintf(out->why_unknown, sizeof(out->why_unknown), "OEAPATCH_TEST_NVIDIA_CC gives %zu of %zu", i,
		         out->n);
}

typedef int (*nvml_fn0)(void);
typedef int (*nvml_count)(unsigned int *);
typedef int (*nvml_handle)(unsigned int, void **);
typedef int (*nvml_cc)(void *, int *, int *);

/* Each GPU's compute capability from NVML, in its index order (which is PCI order, as /proc's sorted names). */
static void nvml_capabilities(oeap_gpus *out)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(out->why_unknown, sizeof(out->why_unknown), "NVML (libnvidia-ml.so.1) does not load: %s",
		         dlerror());
		return;
	}
	nvml_fn0 init = (nvml_fn0)dlsym(h, "nvmlInit_v2"), shutdown = (nvml_fn0)dlsym(h, "nvmlShutdown");
	nvml_count count = (nvml_count)dlsym(h, "nvmlDeviceGetCount_v2");
	nvml_handle handle = (nvml_handle)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	nvml_cc cc = (nvml_cc)dlsym(h, "nvmlDeviceGetCudaComputeCapability");
	unsigned int n = 0;
	int rc = -1;
	if (!init || !shutdown || !count || !handle || !cc)
		snprintf(out->why_unknown, sizeof(out->why_unknown), "NVML lacks an entry point (a driver older than 418?)");
	else if ((rc = init()) != 0)
		snprintf(out->why_unknown, sizeof(out->why_unknown), "nvmlInit_v2 failed (NVML error %d)", rc);
	else {
		if (count(&n) != 0)
			n = 0;
		if (n != out->n)
			snprintf(out->why_unknown, sizeof(out->why_unknown),
			         "NVML counts %u GPUs where the driver's /proc and /dev show %zu", n, out->n);
		for (unsigned int i = 0; n == out->n && i < n; i++) {
			void *dev = NULL;
			int major = 0, minor = 0;
			if (handle(i, &dev) == 0 && cc(dev, &major, &minor) == 0 && major > 0 && minor >= 0 && minor <= 9)
				out->sm[i] = major * 10 + minor;
			else
				snprintf(out->why_unknown, sizeof(out->why_unknown), "NVML gives no compute capability for GPU %u",
				         i);
		}
		shutdown();
	}
	dlclose(h);
}

void oeap_gpus_find(oeap_gpus *out)
{
	memset(out, 0, sizeof(*out));
	const char *root = getenv("OEAPATCH_TEST_NVIDIA_ROOT");
	char path[4096];
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/gpus", root ? root : "");
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)) && out->n < OEAP_GPU_MAX)
		if (e->d_name[0] != '.')
			snprintf(out->bus[out->n++], sizeof(out->bus[0]), "%.60s", e->d_name);
	if (d)
		closedir(d);
	qsort(out->bus, out->n, sizeof(out->bus[0]), by_name);
	/* A container may be given the device files without the driver's /proc. */
	if (!out->n) {
		snprintf(path, sizeof(path), "%s/dev", root ? root : "");
		d = opendir(path);
		while (d && (e = readdir(d)) && out->n < OEAP_GPU_MAX) {
			const char *digits = strncmp(e->d_name, "nvidia", 6) == 0 ? e->d_name + 6 : NULL;
			if (digits && *digits && strspn(digits, "0123456789") == strlen(digits))
				snprintf(out->bus[out->n++], sizeof(out->bus[0]), "/dev/%.20s", e->d_name);
		}
		if (d)
			closedir(d);
		qsort(out->bus, out->n, sizeof(out->bus[0]), by_name);
	}
	if (!out->n)
		return;
	if (root)
		test_capabilities(out, getenv("OEAPATCH_TEST_NVIDIA_CC"));
	else
		nvml_capabilities(out);
}

/* ------------------------------------------------------- the fat binary */

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void add_arch(int *list, size_t *n, int sm)
{
	for (size_t i = 0; i < *n; i++)
		if (list[i] == sm)
			return;
	if (*n < OEAP_FATBIN_MAX)
		list[(*n)++] = sm;
}

#define FATBIN_MAGIC 0xBA55ED50u

/*
 * The containers of a .nv_fatbin section: a 16-byte header (magic,
 * version, header size, size of what follows), then entries, each a header
 * (kind at 0: 1 PTX, 2 cubin; its own size at 4; the size of its payload
 * at 8; the SM at 28) and its payload. Containers follow one another,
 * aligned; anything else is skipped 8 bytes at a time.
 */
static void read_section(const unsigned char *s, size_t n, oeap_fatbin *out)
{
	size_t off = 0;
	while (off + 16 <= n) {
		if (rd32(s + off) != FATBIN_MAGIC) {
			off += 8;
			continue;
		}
		uint32_t hsize = (uint32_t)s[off + 6] | (uint32_t)s[off + 7] << 8;
		uint64_t size = rd64(s + off + 8);
		if (hsize < 16 || size > n - off || hsize > n - off - size) {
			off += 8;
			continue;
		}
		size_t e = off + hsize, end = off + hsize + (size_t)size;
		while (e + 32 <= end) {
			uint16_t kind = (uint16_t)(s[e] | s[e + 1] << 8);
			uint32_t ehsize = rd32(s + e + 4);
			uint64_t payload = rd64(s + e + 8);
			uint32_t sm = rd32(s + e + 28);
			if (ehsize < 32 || ehsize > end - e || payload > end - e - ehsize)
				break;
			if (sm > 0 && sm < 1000) {
				if (kind == 1)
					add_arch(out->ptx, &out->nptx, (int)sm);
				else if (kind == 2 || kind == 0x10)
					add_arch(out->sass, &out->nsass, (int)sm);
			}
			e += ehsize + (size_t)payload;
		}
		off = end > off ? (end + 7) & ~(size_t)7 : off + 8;
	}
	out->found = out->nsass + out->nptx > 0;
}

int oeap_fatbin_read(const char *path, oeap_fatbin *out, char *why, size_t cap)
{
	memset(out, 0, sizeof(*out));
	char *text = NULL;
	size_t len = 0;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_read_file(path, &text, &len, &err)) {
		snprintf(why, cap, "%s cannot be read: %s", path, err.message);
		return -1;
	}
	const unsigned char *b = (const unsigned char *)text;
	int rc = -1;
	if (len < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64 ||
	    b[EI_DATA] != ELFDATA2LSB) {
		snprintf(why, cap, "%s is not a 64-bit little-endian ELF file", path);
		goto done;
	}
	Elf64_Ehdr eh;
	memcpy(&eh, b, sizeof(eh));
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > len ||
	    (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > len - eh.e_shoff || eh.e_shstrndx >= eh.e_shnum) {
		snprintf(why, cap, "%s: its ELF section headers are out of bounds", path);
		goto done;
	}
	Elf64_Shdr names;
	memcpy(&names, b + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof(names));
	if (names.sh_offset > len || names.sh_size > len - names.sh_offset) {
		snprintf(why, cap, "%s: its ELF section names are out of bounds", path);
		goto done;
	}
	for (size_t i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;
		memcpy(&sh, b + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
		static const char want[] = ".nv_fatbin";
		if (sh.sh_name >= names.sh_size || names.sh_size - sh.sh_name < sizeof(want) ||
		    memcmp(b + names.sh_offset + sh.sh_name, want, sizeof(want)) != 0)
			continue;
		if (sh.sh_type != SHT_NOBITS && sh.sh_offset <= len && sh.sh_size <= len - sh.sh_offset)
			read_section(b + sh.sh_offset, (size_t)sh.sh_size, out);
	}
	rc = 0;
done:
	free(text);
	return rc;
}

int oeap_fatbin_runs_on(const oeap_fatbin *fb, int sm)
{
	for (size_t i = 0; i < fb->nsass; i++)
		if (fb->sass[i] / 10 == sm / 10 && fb->sass[i] <= sm)
			return 1;
	for (size_t i = 0; i < fb->nptx; i++)
		if (fb->ptx[i] <= sm)
			return 1;
	return 0;
}

/* ------------------------------------------------------------ the check */

/* The file the loader takes for `library` (a bare name: its search path), or NULL. */
static char *library_file(const char *library)
{
	if (strchr(library, '/'))
		return realpath(library, NULL);
	void *h = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
	struct link_map *map = NULL;
	char *path = NULL;
	if (h && dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
		path = realpath(map->l_name, NULL);
	if (h)
		dlclose(h);
	return path;
}

static void list_archs(const oeap_fatbin *fb, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < fb->nsass && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%ssm_%d", n ? ", " : "", fb->sass[i]);
	for (size_t i = 0; i < fb->nptx && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%sPTX compute_%d", n ? ", " : "", fb->ptx[i]);
}

int oeap_gpu_verify(const char *library, int oea_on, const char *switch_name, oeap_report *rep)
{
	oeap_gpus g;
	oeap_gpus_find(&g);
	if (!g.n || !library)
		return 0; /* no NVIDIA GPU: liboea runs on the CPU, as the library check says */
	char *file = library_file(library);
	oeap_fatbin fb;
	char why[512] = "", archs[512], gpus[1024];
	size_t n = 0;
	gpus[0] = '\0';
	for (size_t i = 0; i < g.n && n < sizeof(gpus); i++) {
		if (g.sm[i])
			n += (size_t)snprintf(gpus + n, sizeof(gpus) - n, "%s%s (sm_%d)", i ? ", " : "", g.bus[i], g.sm[i]);
		else
			n += (size_t)snprintf(gpus + n, sizeof(gpus) - n, "%s%s", i ? ", " : "", g.bus[i]);
	}
	int read = file ? oeap_fatbin_read(file, &fb, why, sizeof(why)) : -1;
	if (!file)
		snprintf(why, sizeof(why), "the loader does not find %s", library);
	free(file);
	const char *consequence = oea_on ? "" : "; ";
	char off[256] = "";
	if (!oea_on)
		snprintf(off, sizeof(off), "%s is off, so nothing runs it now; with OEA on, the start fails",
		         switch_name ? switch_name : "OEA");
	if (read < 0)
		return oeap_report_warn(rep, "gpu", 0, "%zu NVIDIA GPU%s (%s): liboea's code for them not checked: %s",
		                        g.n, g.n == 1 ? "" : "s", gpus, why);
	if (!fb.found) {
		const char *text = "liboea %s is CPU only (no CUDA fat binary) on a machine with %zu NVIDIA GPU%s (%s): "
		                   "the binding stops the server at its first CUDA call (STRICT) or routes nothing; "
		                   "build liboea with CUDA (`oeapatch help verify`)%s%s";
		return oea_on ? oeap_report_add(rep, "gpu", 0, 0, text, library, g.n, g.n == 1 ? "" : "s", gpus,
		                                consequence, off)
		              : oeap_report_warn(rep, "gpu", 0, text, library, g.n, g.n == 1 ? "" : "s", gpus, consequence,
		                                 off);
	}
	list_archs(&fb, archs, sizeof(archs));
	char missing[512];
	size_t m = 0, nmissing = 0, unknown = 0;
	missing[0] = '\0';
	for (size_t i = 0; i < g.n; i++) {
		if (!g.sm[i])
			unknown++;
		else if (!oeap_fatbin_runs_on(&fb, g.sm[i]) && m < sizeof(missing)) {
			m += (size_t)snprintf(missing + m, sizeof(missing) - m, "%ssm_%d (%s)", nmissing ? ", " : "", g.sm[i],
			                      g.bus[i]);
			nmissing++;
		}
	}
	if (nmissing) {
		const char *text = "liboea %s holds %s: no code for %s, and no PTX the driver could compile for it; "
		                   "the binding's first CUDA call fails there (STRICT stops the server); rebuild liboea "
		                   "with that architecture in CMAKE_CUDA_ARCHITECTURES%s%s";
		return oea_on ? oeap_report_add(rep, "gpu", 0, 0, text, library, archs, missing, consequence, off)
		              : oeap_report_warn(rep, "gpu", 0, text, library, archs, missing, consequence, off);
	}
	if (unknown)
		return oeap_report_warn(rep, "gpu", 0,
		                        "%zu NVIDIA GPU%s (%s); liboea holds %s; the compute capability of %zu of them is "
		                        "unknown (%s): not checked",
		                        g.n, g.n == 1 ? "" : "s", gpus, archs, unknown, g.why_unknown);
	return oeap_report_add(rep, "gpu", 1, 0, "%zu NVIDIA GPU%s (%s), each covered by liboea's %s", g.n,
	                       g.n == 1 ? "" : "s", gpus, archs);
}
