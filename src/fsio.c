#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

int oeap_read_file(const char *path, char **data, size_t *len, oeap_error *err)
{
	int error = 0;
	int fd = -1;
	char *buf = NULL;
	struct stat st;
	*data = NULL;
	*len = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot open: %s", strerror(errno));
		goto done;
	}
	if (fstat(fd, &st) < 0) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot stat: %s", strerror(errno));
		goto done;
	}
	if (S_ISDIR(st.st_mode)) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "is a directory, not a file");
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "is not a regular file");
		goto done;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	if (!(buf = malloc(cap + 1))) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "out of memory for %zu bytes", cap);
		goto done;
	}
	for (;;) {
		if (n == cap) {
			/* The file grew while we read it: keep reading what is there. */
			char *p = realloc(buf, cap * 2 + 1);
			if (!p) {
				error = oeap_fail(err, OEAP_ERR_IO, path, 0, "out of memory");
				goto done;
			}
			buf = p;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			error = oeap_fail(err, OEAP_ERR_IO, path, 0, "read failed: %s", strerror(errno));
			goto done;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	buf = NULL;
done:
	free(buf);
	if (fd >= 0)
		close(fd);
	return error;
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

static void dir_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, cap, ".");
	else if (slash == path)
		snprintf(dir, cap, "/");
	else
		snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

static int fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	dir_of(path, dir, sizeof(dir));
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

/*
 * Hardening fix: a read-only directory is the owner saying "do not change
 * what is in here", like a read-only file; root passes access() and may
 * create files in it regardless, so the mode bits are asked too. Used by
 * oeap_write_atomic() and, for the target, by oeap_lock(): apply and revert
 * take the lock before they write anything, so a target that cannot be
 * written is refused there, before the binding module is written beside it.
 */
/* Whether this process can give a new file the owner and group of `st`:
 * root can; anyone else only their own uid and a group they are in. */
static int can_keep_owner(const struct stat *st)
{
	if (geteuid() == 0)
		return 1;
	if (st->st_uid != geteuid())
		return 0;
	if (st->st_gid == getegid())
		return 1;
	gid_t groups[256];
	int n = getgroups((int)(sizeof(groups) / sizeof(groups[0])), groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == st->st_gid)
			return 1;
	return 0;
}

static int refuse_unwritable(const char *path, oeap_error *err)
{
	char dir[PATH_MAX];
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		if (!(st.st_mode & 0222))
			return oeap_fail(err, OEAP_ERR_IO, path, 0, "is read-only (mode %04o): refusing to replace it",
			                 (unsigned)(st.st_mode & 07777));
		if (access(path, W_OK) != 0)
			return oeap_fail(err, OEAP_ERR_IO, path, 0, "is not writable: %s", strerror(errno));
		/* A replaced file belongs to whoever wrote it: a server running as
		 * the file's owner could no longer change it (nor revert). Refused
		 * here, before anything is written, when the owner cannot be kept. */
		if (!can_keep_owner(&st))
			return oeap_fail(err, OEAP_ERR_IO, path, 0,
			                 "belongs to uid %u, gid %u: replacing it as uid %u would change its owner; run "
			                 "oeapatch as its owner (or as root, which keeps the owner)",
			                 (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)geteuid());
	}
	dir_of(path, dir, sizeof(dir));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0; /* a missing directory: creating the temporary file says so */
	if (!(st.st_mode & 0222))
		return oeap_fail(err, OEAP_ERR_IO, path, 0,
		                 "its directory %s is read-only (mode %04o): refusing to write in it", dir,
		                 (unsigned)(st.st_mode & 07777));
	if (access(dir, W_OK | X_OK) != 0)
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "its directory %s is not writable: %s", dir, strerror(errno));
	return 0;
}

/* The names of `path`'s extended attributes (NUL-separated, *n bytes; caller
 * frees), or NULL with *n = 0 for none; -1 in *n when they cannot be listed. */
static char *xattr_names(const char *path, int fd, ssize_t *n)
{
	char *names = NULL;
	for (int tries = 0; tries < 4; tries++) {
		ssize_t size = path ? llistxattr(path, NULL, 0) : flistxattr(fd, NULL, 0);
		if (size < 0) {
			*n = (errno == ENOTSUP || errno == ENOSYS) ? 0 : -1;
			return NULL;
		}
		*n = 0;
		if (size == 0)
			return NULL;
		if (!(names = malloc((size_t)size))) {
			*n = -1;
			return NULL;
		}
		ssize_t got = path ? llistxattr(path, names, (size_t)size) : flistxattr(fd, names, (size_t)size);
		if (got >= 0) {
			*n = got;
			return names;
		}
		free(names);
		names = NULL;
		if (errno != ERANGE) { /* ERANGE: one was added meanwhile, ask again */
			*n = -1;
			return NULL;
		}
	}
	*n = -1;
	return NULL;
}

/* 1 when the NUL-separated list `names` (n bytes) holds `name`. */
static int xattr_listed(const char *names, ssize_t n, const char *name)
{
	for (ssize_t i = 0; names && i < n; i += (ssize_t)strlen(names + i) + 1)
		if (!strcmp(names + i, name))
			return 1;
	return 0;
}

/*
 * Gives the new inode `fd` exactly the extended attributes of the file it
 * replaces, `path`: its POSIX ACLs (system.posix_acl_access: a service user
 * granted read by `setfacl -m u:svc:r` must still read the file), security
 * labels and capabilities, user.* attributes; and none it did not have (a
 * default ACL of the directory gives a new file an access ACL of its own).
 * What cannot be kept refuses the write, naming the attribute: the file
 * would otherwise change in a way nobody asked for (docs/reliability.md).
 */
static int copy_xattrs(const char *path, int fd, oeap_error *err)
{
	ssize_t n = 0, tn = 0;
	int error = 0;
	char *names = xattr_names(path, -1, &n), *theirs = NULL, *value = NULL;
	if (n < 0)
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot list its extended attributes (ACLs): %s: refusing to "
		                 "replace it", strerror(errno));
	theirs = xattr_names(NULL, fd, &tn);
	for (ssize_t i = 0; theirs && i < tn; i += (ssize_t)strlen(theirs + i) + 1)
		if (!xattr_listed(names, n, theirs + i) && fremovexattr(fd, theirs + i) && errno != ENODATA) {
			error = oeap_fail(err, OEAP_ERR_IO, path, 0,
			                  "the new file got the extended attribute %s (its directory's default), which the "
			                  "file it replaces has not, and it cannot be removed: %s: refusing to replace it",
			                  theirs + i, strerror(errno));
			goto done;
		}
	for (ssize_t i = 0; names && i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *name = names + i;
		ssize_t size = lgetxattr(path, name, NULL, 0);
		if (size < 0 || (size > 0 && !(value = malloc((size_t)size))) ||
		    (size > 0 && (size = lgetxattr(path, name, value, (size_t)size)) < 0) ||
		    fsetxattr(fd, name, value ? value : "", (size_t)size, 0)) {
			error = oeap_fail(err, OEAP_ERR_IO, path, 0,
			                  "cannot keep its extended attribute %s%s on the new file: %s: refusing to replace "
			                  "it (the file would lose it)",
			                  name, !strcmp(name, "system.posix_acl_access") ? " (its ACL)" : "",
			                  strerror(errno));
			goto done;
		}
		free(value);
		value = NULL;
	}
done:
	free(value);
	free(theirs);
	free(names);
	return error;
}

int oeap_write_atomic(const char *path, const char *data, size_t len, mode_t mode, oeap_error *err)
{
	int error = 0;
	char tmp[PATH_MAX];
	int fd = -1;
	struct stat st;
	int tmp_made = 0;

	int existed = 0, had_file = 0;
	struct stat dst;
	char dir[PATH_MAX];
	if (lstat(path, &st) == 0) {
		existed = had_file = 1;
		if (S_ISLNK(st.st_mode))
			return oeap_fail(err, OEAP_ERR_IO, path, 0,
			                 "is a symbolic link: refusing to replace it (patch the file it points to)");
		if (!S_ISREG(st.st_mode))
			return oeap_fail(err, OEAP_ERR_IO, path, 0, "is not a regular file");
		mode = st.st_mode & 07777;
		/* rename() would replace a read-only file happily; a read-only file
		 * is the owner saying "do not change this", so we do not. access()
		 * alone says yes to root, so the mode bits are asked too. */
		if (!(st.st_mode & 0222))
			return oeap_fail(err, OEAP_ERR_IO, path, 0, "is read-only (mode %04o): refusing to replace it",
			                 (unsigned)mode);
		if (access(path, W_OK) != 0)
			return oeap_fail(err, OEAP_ERR_IO, path, 0, "is not writable: %s", strerror(errno));
	} else if (errno != ENOENT) {
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot stat: %s", strerror(errno));
	}
	/* A unique name: a temporary file a crash left behind must never block
	 * or be mistaken for ours (pids repeat, in containers especially). */
	if (snprintf(tmp, sizeof(tmp), "%s.oeapatch-tmp.XXXXXX", path) >= (int)sizeof(tmp))
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "path too long");
	if (refuse_unwritable(path, err)) /* hardening: read-only directory, even for root */
		return -1;
	oeap_fault_point("write:before-temp");
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot create a temporary file beside it: %s",
		                  strerror(errno));
		goto done;
	}
	tmp_made = 1;
	/* The new inode must carry the old one's owner and group (root would
	 * otherwise leave a root-owned file that the server's user cannot
	 * revert). A file root creates gets its directory's owner, as if that
	 * user had written it. Failing that, the old file stays. */
	dir_of(path, dir, sizeof(dir));
	if (!existed && geteuid() == 0 && stat(dir, &dst) == 0) {
		st.st_uid = dst.st_uid;
		st.st_gid = dst.st_gid;
		existed = 1;
	}
	if (existed && (st.st_uid != geteuid() || st.st_gid != getegid()) && fchown(fd, st.st_uid, st.st_gid)) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot keep its owner %u:%u: %s: refusing to replace it",
		                  (unsigned)st.st_uid, (unsigned)st.st_gid, strerror(errno));
		goto done;
	}
	size_t half = len / 2;
	if (write_all(fd, data, half)) {
		error = oeap_fail(err, OEAP_ERR_IO, tmp, 0, "write failed: %s", strerror(errno));
		goto done;
	}
	oeap_fault_point("write:half-written");
	if (write_all(fd, data + half, len - half) || fchmod(fd, mode)) {
		error = oeap_fail(err, OEAP_ERR_IO, tmp, 0, "write failed: %s", strerror(errno));
		goto done;
	}
	/* After the mode: an access ACL's mask then stands as the old file's. */
	if (had_file && (error = copy_xattrs(path, fd, err)))
		goto done;
	if (fsync(fd)) {
		error = oeap_fail(err, OEAP_ERR_IO, tmp, 0, "write failed: %s", strerror(errno));
		goto done;
	}
	if (close(fd)) {
		fd = -1;
		error = oeap_fail(err, OEAP_ERR_IO, tmp, 0, "close failed: %s", strerror(errno));
		goto done;
	}
	fd = -1;
	oeap_fault_point("write:before-rename");
	if (rename(tmp, path)) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "rename failed: %s", strerror(errno));
		goto done;
	}
	tmp_made = 0;
	oeap_fault_point("write:after-rename");
	fsync_dir(path);
done:
	if (fd >= 0)
		close(fd);
	if (tmp_made)
		unlink(tmp);
	return error;
}

int oeap_file_holds(const char *path, const char *data, size_t len)
{
	char *now = NULL;
	size_t now_len = 0;
	oeap_error ignore;
	oeap_error_clear(&ignore);
	int absent = oeap_read_file(path, &now, &now_len, &ignore) != 0;
	int same = data ? !absent && now_len == len && memcmp(now, data, len) == 0 : absent;
	free(now);
	return same;
}

int oeap_remove_file(const char *path, oeap_error *err)
{
	if (unlink(path) && errno != ENOENT)
		return oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot remove: %s", strerror(errno));
	fsync_dir(path);
	return 0;
}

int oeap_lock(const char *path, int timeout_ms, oeap_error *err)
{
	return oeap_lock_flags(path, timeout_ms, 0, err);
}

int oeap_lock_flags(const char *path, int timeout_ms, unsigned flags, oeap_error *err)
{
	char dir[PATH_MAX];
	struct stat st;
	dir_of(path, dir, sizeof(dir));
	/* Hardening: refuse a target that cannot be changed before anything is written. */
	if (refuse_unwritable(path, err))
		return -1;
	/* An atomic replace gives this path a new inode: every other hard link
	 * keeps the old bytes, and whoever reads through it is silently left
	 * with the other version. That is the user's call, not ours. */
	if (!(flags & OEAP_LOCK_BREAK_LINKS) && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
		return oeap_fail(err, OEAP_ERR_IO, path, 0,
		                 "has %lu hard links: writing it replaces this name only, and the other %lu would keep the "
		                 "old content; refusing (--break-links replaces it anyway)",
		                 (unsigned long)st.st_nlink, (unsigned long)st.st_nlink - 1);
	/* The lock is flock on the target's directory: no lock file, so a kill
	 * leaves nothing behind (a stale lock file showed in `git status`), and
	 * the kernel releases it with the process. The directory is never
	 * replaced, unlike the target; only oeapatch locks it. */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return oeap_fail(err, OEAP_ERR_IO, dir, 0, "cannot open the directory to lock it: %s", strerror(errno));
	for (int waited = 0;; waited += 20) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			/* Hardening: a crash while holding the lock must leave nothing behind. */
			oeap_fault_point("lock:acquired");
			return fd;
		}
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int e = errno;
			close(fd);
			return oeap_fail(err, OEAP_ERR_IO, dir, 0, "cannot lock: %s", strerror(e));
		}
		if (waited >= timeout_ms) {
			close(fd);
			return oeap_fail(err, OEAP_ERR_IO, path, 0,
			                 "another oeapatch holds the lock on %s (waited %d ms): try again when it is done", dir,
			                 timeout_ms);
		}
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

void oeap_unlock(int fd, const char *path)
{
	(void)path;
	if (fd < 0)
		return;
	flock(fd, LOCK_UN);
	close(fd);
}

int oeap_path_inside(const char *root, const char *rel, char **out, oeap_error *err)
{
	char rroot[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
	*out = NULL;
	if (!realpath(root, rroot))
		return oeap_fail(err, OEAP_ERR_IO, root, 0, "cannot resolve the checkout: %s", strerror(errno));
	if (snprintf(joined, sizeof(joined), "%s/%s", rroot, rel) >= (int)sizeof(joined))
		return oeap_fail(err, OEAP_ERR_IO, rel, 0, "path too long");
	if (strstr(rel, "..") && (strncmp(rel, "../", 3) == 0 || strstr(rel, "/../") || strcmp(rel, "..") == 0 ||
	                          (strlen(rel) >= 3 && strcmp(rel + strlen(rel) - 3, "/..") == 0)))
		return oeap_fail(err, OEAP_ERR_IO, rel, 0, "a path with '..' may lead outside the checkout: refusing");
	/* The directories are resolved (the deepest one that exists, so a path
	 * through a symlink out of the tree is refused before the file exists);
	 * the file name is not: see the symlink check below. */
	char probe[PATH_MAX];
	snprintf(probe, sizeof(probe), "%s", joined);
	const char *rest = strrchr(joined, '/');
	probe[rest - joined] = '\0';
	while (!realpath(probe, real)) {
		if (errno != ENOENT && errno != ENOTDIR)
			return oeap_fail(err, OEAP_ERR_IO, joined, 0, "cannot resolve: %s", strerror(errno));
		char *slash = strrchr(probe, '/');
		if (!slash || slash == probe)
			return oeap_fail(err, OEAP_ERR_IO, joined, 0, "cannot resolve any parent directory");
		*slash = '\0';
		rest = joined + (slash - probe);
	}
	size_t n = strlen(rroot);
	if (strcmp(rroot, "/") != 0 && (strncmp(real, rroot, n) != 0 || (real[n] != '/' && real[n] != '\0')))
		return oeap_fail(err, OEAP_ERR_IO, joined, 0,
		                 "resolves to %s, outside the checkout %s (a symbolic link out of the tree): refusing",
		                 real, rroot);
	char full[PATH_MAX * 2];
	snprintf(full, sizeof(full), "%s%s", real, rest);
	/* A target that is itself a symbolic link is refused, wherever it points:
	 * Python imports it from the link's directory, so the binding module
	 * beside it must go there, and the file written is another one. */
	struct stat st;
	if (lstat(full, &st) == 0 && S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		if (realpath(full, target) && strcmp(rroot, "/") != 0 &&
		    (strncmp(target, rroot, n) != 0 || (target[n] != '/' && target[n] != '\0')))
			return oeap_fail(err, OEAP_ERR_IO, joined, 0,
			                 "resolves to %s, outside the checkout %s (a symbolic link out of the tree): "
			                 "refusing",
			                 target, rroot);
		return oeap_fail(err, OEAP_ERR_IO, joined, 0,
		                 "is a symbolic link: refusing (Python imports it from here, the file written would be "
		                 "another one; replace the link by the file)");
	}
	*out = strdup(full);
	return *out ? 0 : oeap_fail(err, OEAP_ERR_INTERNAL, rel, 0, "out of memory");
}

void oeap_fault_point(const char *step)
{
	/* OEAPATCH_FAULT_STEP=<name> exits at that step, as a kill -9 would stop
	 * the process there; the tests then show the file is old or new, never
	 * a mix. Unset in production: one getenv per step. */
	const char *want = getenv("OEAPATCH_FAULT_STEP");
	if (!want)
		return;
	/* "<name>@<n>": exit the n-th time the step is reached (hardening: apply
	 * writes the binding module and then the target through the same
	 * write:* steps; "write:half-written@2" stops inside the second write). */
	static unsigned hits;
	const char *at = strchr(want, '@');
	size_t n = at ? (size_t)(at - want) : strlen(want);
	if (strlen(step) != n || strncmp(want, step, n) != 0)
		return;
	if (!at || ++hits == (unsigned)strtoul(at + 1, NULL, 10))
		_exit(99);
}
