/* outputcheck.c - the folder of an `output` setting (outputcheck.h). */
#include "outputcheck.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *user_name(char *buf, size_t cap)
{
	struct passwd *pw = getpwuid(geteuid());
	if (pw && pw->pw_name)
		snprintf(buf, cap, "%s (uid %ld)", pw->pw_name, (long)geteuid());
	else
		snprintf(buf, cap, "uid %ld", (long)geteuid());
	return buf;
}

int oeap_output_problem(const char *path, char *why, size_t cap)
{
	char folder[PATH_MAX], who[128];
	struct stat st;
	size_t n = strlen(path);
	if (path[0] != '/') {
		/* the binding opens it as given: relative to the server's working directory, not verify's */
		snprintf(why, cap, "a relative path: the server would resolve it against its own working directory, "
		                   "not this one; give an absolute path");
		return 1;
	}
	if (path[n - 1] == '/') {
		snprintf(why, cap, "names a folder: give a file name in it (each process writes NAME-rank<R>-<pid>"
		                   ".safetensors beside it)");
		return 1;
	}
	const char *slash = strrchr(path, '/');
	size_t len = slash == path ? 1 : (size_t)(slash - path);
	if (len >= sizeof(folder)) {
		snprintf(why, cap, "a path longer than PATH_MAX");
		return 1;
	}
	memcpy(folder, path, len);
	folder[len] = '\0';
	if (stat(folder, &st) != 0) {
		snprintf(why, cap, "its folder %s cannot be reached: %s", folder, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, cap, "%s is not a folder", folder);
		return 1;
	}
	if (access(folder, W_OK | X_OK) != 0) {
		snprintf(why, cap, "the folder %s is not writable by %s, which runs this check (run verify as the "
		                   "service's user): the recorder would stop at its first chunk and record nothing",
		         folder, user_name(who, sizeof(who)));
		return 1;
	}
	return 0;
}
