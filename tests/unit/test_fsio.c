/*
 * test_fsio.c - atomic writes (modes, refusals, crashes at each step),
 * reading, locking and path containment.
 *
 * Children are forked where a second process is the point (locks, crashes);
 * they report with their exit status only, never with cmocka's assertions.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsio.h"

static const char OLD[] = "old contents\nline two\n";
static const char NEW[] = "new contents, longer than the old ones\nline two\nline three\n";

typedef struct fixture {
	char *dir;
	char path[PATH_MAX];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->dir = tu_tmpdir();
	snprintf(f->path, sizeof(f->path), "%s/topk.py", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Asserts that `path` holds exactly `want`. */
static void expect_content(const char *path, const char *want, size_t len)
{
	char *data = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_read_file(path, &data, &n, &err))
		fail_msg("%s: %s", path, err.message);
	assert_int_equal(n, len);
	assert_memory_equal(data, want, len);
	free(data);
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/* Number of entries in `dir` other than . and .., and how many are temp files. */
static size_t count_entries(const char *dir, size_t *temps)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	*temps = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		if (strstr(e->d_name, ".oeapatch-tmp."))
			(*temps)++;
	}
	closedir(d);
	return n;
}

/* The names in `dir` (other than . and ..), sorted, separated by spaces. Caller frees. */
static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *dir_listing(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	char *names[64];
	size_t n = 0, total = 1;
	for (struct dirent *e; (e = readdir(d)) != NULL && n < 64;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		names[n] = strdup(e->d_name);
		assert_non_null(names[n]);
		total += strlen(names[n++]) + 1;
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_names);
	char *out = calloc(1, total);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(out, " ");
		strcat(out, names[i]);
		free(names[i]);
	}
	return out;
}

static void write_ok(const char *path, const char *data, mode_t mode)
{
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_write_atomic(path, data, strlen(data), mode, &err))
		fail_msg("%s: %s: %s", path, err.where, err.message);
}

static oeap_error write_refused(const char *path, const char *data)
{
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_write_atomic(path, data, strlen(data), 0644, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_string_equal(err.where, path);
	return err;
}

static void test_write_creates_with_mode(void **state)
{
	fixture *f = *state;
	write_ok(f->path, NEW, 0640);
	expect_content(f->path, NEW, strlen(NEW));
	assert_int_equal(mode_of(f->path), 0640);
	/* Not subject to the umask either way. */
	char other[PATH_MAX + 8];
	snprintf(other, sizeof(other), "%s.b", f->path);
	write_ok(other, OLD, 0777);
	assert_int_equal(mode_of(other), 0777);
	size_t temps;
	assert_int_equal(count_entries(f->dir, &temps), 2);
	assert_int_equal(temps, 0);
}

static void test_write_keeps_existing_mode(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(chmod(f->path, 0751), 0);
	write_ok(f->path, NEW, 0600);
	expect_content(f->path, NEW, strlen(NEW));
	assert_int_equal(mode_of(f->path), 0751);
	/* Shorter contents replace longer ones completely. */
	write_ok(f->path, OLD, 0600);
	expect_content(f->path, OLD, strlen(OLD));
	assert_int_equal(mode_of(f->path), 0751);
	/* Empty contents are fine too. */
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_write_atomic(f->path, "", 0, 0600, &err), 0);
	expect_content(f->path, "", 0);
	size_t temps;
	assert_int_equal(count_entries(f->dir, &temps), 1);
	assert_int_equal(temps, 0);
}

static void test_write_replaces_inode(void **state)
{
	fixture *f = *state;
	/* Atomic means a new inode: a reader holding the old file keeps the old bytes. */
	tu_write(f->path, OLD, strlen(OLD));
	FILE *reader = fopen(f->path, "rb");
	assert_non_null(reader);
	write_ok(f->path, NEW, 0644);
	char buf[128] = {0};
	size_t n = fread(buf, 1, sizeof(buf) - 1, reader);
	fclose(reader);
	assert_int_equal(n, strlen(OLD));
	assert_string_equal(buf, OLD);
	expect_content(f->path, NEW, strlen(NEW));
}

static void test_write_refuses_symlink(void **state)
{
	fixture *f = *state;
	char real[PATH_MAX + 8];
	snprintf(real, sizeof(real), "%s/real.py", f->dir);
	tu_write(real, OLD, strlen(OLD));
	assert_int_equal(symlink(real, f->path), 0);
	oeap_error err = write_refused(f->path, NEW);
	assert_non_null(strstr(err.message, "symbolic link"));
	struct stat st;
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	expect_content(real, OLD, strlen(OLD));
	/* A dangling link is refused as well, and nothing is created through it. */
	char dangling[PATH_MAX + 8];
	snprintf(dangling, sizeof(dangling), "%s/dangling.py", f->dir);
	assert_int_equal(symlink("nowhere.py", dangling), 0);
	err = write_refused(dangling, NEW);
	assert_non_null(strstr(err.message, "symbolic link"));
	char nowhere[PATH_MAX + 16];
	snprintf(nowhere, sizeof(nowhere), "%s/nowhere.py", f->dir);
	assert_int_equal(access(nowhere, F_OK), -1);
	size_t temps;
	count_entries(f->dir, &temps);
	assert_int_equal(temps, 0);
}

static void test_write_refuses_directory(void **state)
{
	fixture *f = *state;
	assert_int_equal(mkdir(f->path, 0755), 0);
	oeap_error err = write_refused(f->path, NEW);
	assert_non_null(strstr(err.message, "not a regular file"));
	struct stat st;
	assert_int_equal(stat(f->path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	size_t temps;
	count_entries(f->dir, &temps);
	assert_int_equal(temps, 0);
}

static void test_write_refuses_missing_directory(void **state)
{
	fixture *f = *state;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/no/such/dir.py", f->dir);
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_write_atomic(path, NEW, strlen(NEW), 0644, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, "temporary file"));
}

/* As an unprivileged user (forked, setuid nobody), a read-only file is refused. */
static void test_write_refuses_readonly_unprivileged(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(chmod(f->path, 0444), 0);
	int privileged = geteuid() == 0;
	if (privileged) {
		/* nobody must be able to create the temp file beside it. */
		assert_int_equal(chmod(f->dir, 0777), 0);
		assert_int_equal(chown(f->path, 65534, 65534), 0);
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (privileged && (setgid(65534) || setuid(65534)))
			_exit(3);
		oeap_error err;
		oeap_error_clear(&err);
		if (oeap_write_atomic(f->path, NEW, strlen(NEW), 0644, &err) != -1)
			_exit(1);
		_exit(err.kind == OEAP_ERR_IO && (strstr(err.message, "read-only") || strstr(err.message, "not writable")) ? 0 : 2);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	expect_content(f->path, OLD, strlen(OLD));
	assert_int_equal(mode_of(f->path), 0444);
	size_t temps;
	count_entries(f->dir, &temps);
	assert_int_equal(temps, 0);
}

/*
 * The code's intent ("a read-only file is the owner saying do not change
 * this") must hold for root too: access(W_OK) is always true for root on a
 * regular file, so as root a 0444 file is silently replaced.
 */
static void test_write_refuses_readonly_as_root(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(chmod(f->path, 0444), 0);
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_write_atomic(f->path, NEW, strlen(NEW), 0644, &err);
	if (rc == 0)
		fail_msg("a read-only (0444) file was replaced (euid %d): the read-only check does not hold "
		         "for root", (int)geteuid());
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, "read-only"));
	expect_content(f->path, OLD, strlen(OLD));
}

static void test_read_file(void **state)
{
	fixture *f = *state;
	static const char data[] = "a\0b\nc";
	tu_write(f->path, data, sizeof(data) - 1);
	char *got = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_read_file(f->path, &got, &n, &err), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(got, data, 5);
	assert_int_equal(got[5], '\0');
	free(got);
}

static void test_read_file_errors(void **state)
{
	fixture *f = *state;
	char *got = (char *)1;
	size_t n = 9;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_read_file(f->dir, &got, &n, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_string_equal(err.where, f->dir);
	assert_non_null(strstr(err.message, "is a directory"));
	assert_null(got);
	assert_int_equal(n, 0);

	oeap_error_clear(&err);
	assert_int_equal(oeap_read_file(f->path, &got, &n, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_string_equal(err.where, f->path);
	assert_non_null(strstr(err.message, "cannot open"));
	assert_non_null(strstr(err.message, strerror(ENOENT)));
	assert_null(got);

	oeap_error_clear(&err);
	assert_int_equal(oeap_read_file("/dev/null", &got, &n, &err), -1);
	assert_non_null(strstr(err.message, "not a regular file"));
}

static void test_path_inside(void **state)
{
	fixture *f = *state;
	char root[PATH_MAX], real_root[PATH_MAX], file[PATH_MAX + 32], want[PATH_MAX + 32];
	snprintf(root, sizeof(root), "%s/checkout", f->dir);
	snprintf(file, sizeof(file), "%s/python/pkg/topk.py", root);
	tu_write(file, OLD, strlen(OLD));
	assert_non_null(realpath(root, real_root));

	char *out = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_path_inside(root, "python/pkg/topk.py", &out, &err), 0);
	snprintf(want, sizeof(want), "%s/python/pkg/topk.py", real_root);
	assert_string_equal(out, want);
	free(out);

	/* A link inside the tree, even to a file inside the tree, is refused:
	 * Python imports the link's path, so the binding module would land in
	 * the wrong directory. */
	char inner[PATH_MAX + 32];
	snprintf(inner, sizeof(inner), "%s/alias.py", root);
	assert_int_equal(symlink("python/pkg/topk.py", inner), 0);
	out = (char *)1;
	assert_int_equal(oeap_path_inside(root, "alias.py", &out, &err), -1);
	assert_null(out);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, "symbolic link"));
	oeap_error_clear(&err);

	/* Missing: root/rel (the root resolved). */
	assert_int_equal(oeap_path_inside(root, "python/pkg/missing.py", &out, &err), 0);
	snprintf(want, sizeof(want), "%s/python/pkg/missing.py", real_root);
	assert_string_equal(out, want);
	free(out);
	assert_int_equal(err.kind, OEAP_ERR_NONE);
}

static void test_path_inside_refuses_escape(void **state)
{
	fixture *f = *state;
	char root[PATH_MAX], outside[PATH_MAX + 32], link[PATH_MAX + 32];
	snprintf(root, sizeof(root), "%s/checkout", f->dir);
	snprintf(outside, sizeof(outside), "%s/outside/topk.py", f->dir);
	tu_write(outside, OLD, strlen(OLD));
	assert_int_equal(mkdir(root, 0755), 0);
	snprintf(link, sizeof(link), "%s/python", root);
	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(symlink(outside, link), 0);

	char *out = (char *)1;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_path_inside(root, "python/topk.py", &out, &err), -1);
	assert_null(out);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, "outside the checkout"));
	/* Not fooled by a root that is a prefix of the real path: checkout2. */
	char root2[PATH_MAX + 8], f2[PATH_MAX + 32];
	snprintf(root2, sizeof(root2), "%s2", root);
	snprintf(f2, sizeof(f2), "%s2/x.py", root);
	tu_write(f2, OLD, strlen(OLD));
	oeap_error_clear(&err);
	assert_int_equal(oeap_path_inside(root, "../checkout2/x.py", &out, &err), -1);
	assert_non_null(strstr(err.message, "outside the checkout"));
	/* A missing root. */
	oeap_error_clear(&err);
	snprintf(root2, sizeof(root2), "%s/nope", f->dir);
	assert_int_equal(oeap_path_inside(root2, "x.py", &out, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, "cannot resolve the checkout"));
}

/*
 * A path that does not exist yet must not escape either: through a link to
 * outside the tree, or with "..". oeap_path_inside returns root/rel unchecked
 * whenever realpath() says ENOENT.
 */
static void test_path_inside_missing_file_cannot_escape(void **state)
{
	fixture *f = *state;
	char root[PATH_MAX], outside[PATH_MAX + 32], link[PATH_MAX + 32];
	snprintf(root, sizeof(root), "%s/checkout", f->dir);
	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(mkdir(root, 0755), 0);
	assert_int_equal(mkdir(outside, 0755), 0);
	snprintf(link, sizeof(link), "%s/python", root);
	assert_int_equal(symlink(outside, link), 0);

	char *out = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_path_inside(root, "python/new_module.py", &out, &err);
	if (rc == 0) {
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof(msg), "accepted %s (really under %s)", out, outside);
		free(out);
		fail_msg("%s", msg);
	}
	assert_non_null(strstr(err.message, "outside the checkout"));
	oeap_error_clear(&err);
	rc = oeap_path_inside(root, "../outside/new_module.py", &out, &err);
	if (rc == 0) {
		free(out);
		fail_msg("accepted ../outside/new_module.py");
	}
}

static int child_lock(const char *path, int timeout_ms, const char *want_in_message)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		oeap_error err;
		oeap_error_clear(&err);
		int fd = oeap_lock(path, timeout_ms, &err);
		if (want_in_message) {
			if (fd >= 0)
				_exit(1);
			_exit(err.kind == OEAP_ERR_IO && strstr(err.message, want_in_message) &&
			              strstr(err.message, "another oeapatch holds the lock")
			          ? 0
			          : 2);
		}
		if (fd < 0)
			_exit(3);
		oeap_unlock(fd, path);
		_exit(0);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_lock(void **state)
{
	fixture *f = *state;
	char lockfile[PATH_MAX + 32];
	snprintf(lockfile, sizeof(lockfile), "%s.oeapatch.lock", f->path);
	oeap_error err;
	oeap_error_clear(&err);
	int fd = oeap_lock(f->path, 1000, &err);
	assert_true(fd >= 0);
	/* The lock is on the directory: no file a kill could leave behind (a
	 * stale lock file showed in `git status`). */
	assert_int_equal(access(lockfile, F_OK), -1);
	char *listing = dir_listing(f->dir);
	if (strcmp(listing, "") != 0)
		fail_msg("taking the lock created files: %s", listing);
	free(listing);
	/* A second process times out, naming the locked directory. */
	assert_int_equal(child_lock(f->path, 100, f->dir), 0);
	oeap_unlock(fd, f->path);
	/* ... and gets it once it is free. */
	assert_int_equal(child_lock(f->path, 100, NULL), 0);
	/* Ours again, twice in a row. */
	fd = oeap_lock(f->path, 100, &err);
	assert_true(fd >= 0);
	oeap_unlock(fd, f->path);
	fd = oeap_lock(f->path, 100, &err);
	assert_true(fd >= 0);
	oeap_unlock(fd, f->path);
	assert_int_equal(err.kind, OEAP_ERR_NONE);
}

/* A process killed while holding the lock leaves nothing in the directory,
 * and the next one gets the lock at once. */
static void test_lock_killed_holder_leaves_nothing(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("OEAPATCH_FAULT_STEP", "lock:acquired", 1);
		oeap_error err;
		oeap_error_clear(&err);
		oeap_lock(f->path, 1000, &err);
		_exit(0); /* the fault point exits with 99 while holding the lock */
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 99);
	char *listing = dir_listing(f->dir);
	if (strcmp(listing, "topk.py") != 0)
		fail_msg("a process killed holding the lock left: %s", listing);
	free(listing);
	oeap_error err;
	oeap_error_clear(&err);
	int fd = oeap_lock(f->path, 100, &err);
	if (fd < 0)
		fail_msg("the lock of a killed process is still held: %s", err.message);
	oeap_unlock(fd, f->path);
}

/* A target with other hard links: replacing it would leave them with the
 * old bytes, so the lock (taken before anything is written) refuses it
 * unless asked. */
static void test_lock_refuses_hard_links(void **state)
{
	fixture *f = *state;
	char other[PATH_MAX + 16];
	snprintf(other, sizeof(other), "%s/other.py", f->dir);
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(link(f->path, other), 0);
	oeap_error err;
	oeap_error_clear(&err);
	int fd = oeap_lock(f->path, 100, &err);
	if (fd >= 0) {
		oeap_unlock(fd, f->path);
		fail_msg("a target with 2 hard links was locked for writing: the other link would be split off");
	}
	assert_non_null(strstr(err.message, "2 hard links"));
	assert_non_null(strstr(err.message, "--break-links"));
	oeap_error_clear(&err);
	fd = oeap_lock_flags(f->path, 100, OEAP_LOCK_BREAK_LINKS, &err);
	assert_true(fd >= 0);
	oeap_unlock(fd, f->path);
}

/*
 * A waiter gets the lock when the holder lets go, and then nobody else does
 * (with a lock file that the holder unlinked, the waiter held an unlinked
 * inode while a third process locked a fresh file: two holders).
 */
static void test_lock_waiter_after_unlink_is_exclusive(void **state)
{
	fixture *f = *state;
	int ready[2], acquired[2], release[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(acquired), 0);
	assert_int_equal(pipe(release), 0);
	oeap_error err;
	oeap_error_clear(&err);
	int fd = oeap_lock(f->path, 1000, &err);
	assert_true(fd >= 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c = 'r';
		oeap_error cerr;
		oeap_error_clear(&cerr);
		if (write(ready[1], &c, 1) != 1)
			_exit(4);
		int cfd = oeap_lock(f->path, 5000, &cerr);
		c = cfd >= 0 ? 'y' : 'n';
		if (write(acquired[1], &c, 1) != 1)
			_exit(4);
		/* Hold it until the parent has tried. */
		if (read(release[0], &c, 1) != 1)
			_exit(4);
		oeap_unlock(cfd, f->path);
		_exit(0);
	}
	char c = 0;
	assert_int_equal(read(ready[0], &c, 1), 1);
	/* Let the child open the lock file and start waiting. */
	struct timespec ts = {0, 150 * 1000 * 1000};
	nanosleep(&ts, NULL);
	oeap_unlock(fd, f->path);
	assert_int_equal(read(acquired[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	/* The child holds the lock now: we must not get it. */
	oeap_error_clear(&err);
	int fd2 = oeap_lock(f->path, 100, &err);
	if (fd2 >= 0)
		oeap_unlock(fd2, f->path);
	assert_int_equal(write(release[1], "x", 1), 1);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(acquired[i]);
		close(release[i]);
	}
	if (fd2 >= 0)
		fail_msg("two processes held the lock at once (the waiter locked the unlinked lock file)");
	assert_int_equal(err.kind, OEAP_ERR_IO);
}

/* Forks a child that writes `data` over path with OEAPATCH_FAULT_STEP=step; returns its pid. */
static pid_t crash_at(const char *step, const char *path, const char *data)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("OEAPATCH_FAULT_STEP", step, 1);
		oeap_error err;
		oeap_error_clear(&err);
		oeap_write_atomic(path, data, strlen(data), 0644, &err);
		_exit(0); /* the fault point should have exited with 99 first */
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 99);
	return pid;
}

/* The one temporary file a crashed write of `path` left beside it
 * (<path>.oeapatch-tmp.XXXXXX, a unique mkostemp name). */
static void temp_path(char *out, size_t cap, const char *path, pid_t pid)
{
	(void)pid;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	assert_non_null(slash);
	*slash = '\0';
	char prefix[PATH_MAX];
	snprintf(prefix, sizeof(prefix), "%s.oeapatch-tmp.", slash + 1);
	DIR *d = opendir(dir);
	assert_non_null(d);
	int found = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
			if ((size_t)snprintf(out, cap, "%s/%.200s", dir, e->d_name) >= cap)
				fail_msg("temp path too long");
			found++;
		}
	closedir(d);
	assert_int_equal(found, 1);
}

static void test_fault_half_written(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(chmod(f->path, 0640), 0);
	pid_t pid = crash_at("write:half-written", f->path, NEW);
	expect_content(f->path, OLD, strlen(OLD));
	assert_int_equal(mode_of(f->path), 0640);
	/* The temp file a crash leaves holds the first half, and only that. */
	char tmp[PATH_MAX + 256];
	temp_path(tmp, sizeof(tmp), f->path, pid);
	expect_content(tmp, NEW, strlen(NEW) / 2);
	/* The next writer replaces the target, not with the leftover. */
	write_ok(f->path, NEW, 0600);
	expect_content(f->path, NEW, strlen(NEW));
	assert_int_equal(mode_of(f->path), 0640);
	expect_content(tmp, NEW, strlen(NEW) / 2);
}

static void test_fault_before_rename(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	pid_t pid = crash_at("write:before-rename", f->path, NEW);
	expect_content(f->path, OLD, strlen(OLD));
	char tmp[PATH_MAX + 256];
	temp_path(tmp, sizeof(tmp), f->path, pid);
	expect_content(tmp, NEW, strlen(NEW));
	/* A crash while creating a new file leaves no target at all. */
	char fresh[PATH_MAX + 16];
	snprintf(fresh, sizeof(fresh), "%s/fresh.py", f->dir);
	crash_at("write:before-rename", fresh, NEW);
	assert_int_equal(access(fresh, F_OK), -1);
	/* A later write goes through and ignores the leftover. */
	static const char NEWER[] = "newer\n";
	write_ok(f->path, NEWER, 0644);
	expect_content(f->path, NEWER, strlen(NEWER));
	expect_content(tmp, NEW, strlen(NEW));
}

static void test_fault_before_temp(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	crash_at("write:before-temp", f->path, NEW);
	expect_content(f->path, OLD, strlen(OLD));
	size_t temps;
	assert_int_equal(count_entries(f->dir, &temps), 1);
	assert_int_equal(temps, 0);
}

static void test_fault_after_rename(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	assert_int_equal(chmod(f->path, 0700), 0);
	crash_at("write:after-rename", f->path, NEW);
	expect_content(f->path, NEW, strlen(NEW));
	assert_int_equal(mode_of(f->path), 0700);
	size_t temps;
	assert_int_equal(count_entries(f->dir, &temps), 1);
	assert_int_equal(temps, 0);
}

static void test_fault_other_step_ignored(void **state)
{
	fixture *f = *state;
	/* A step name that is not this one does not stop the write. */
	setenv("OEAPATCH_FAULT_STEP", "write:no-such-step", 1);
	write_ok(f->path, NEW, 0644);
	unsetenv("OEAPATCH_FAULT_STEP");
	expect_content(f->path, NEW, strlen(NEW));
}

/*
 * A crash leaves a temp file behind; a later run (containers start oeapatch
 * with the same small pid every time) must still be able to write: temp
 * names are unique (mkostemp), never <path>.oeapatch-tmp.<pid>.
 */
static void test_stale_temp_does_not_block(void **state)
{
	fixture *f = *state;
	tu_write(f->path, OLD, strlen(OLD));
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof(tmp), "%s.oeapatch-tmp.%ld", f->path, (long)getpid());
	tu_write(tmp, "stale half", 10);
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_write_atomic(f->path, NEW, strlen(NEW), 0644, &err);
	if (rc)
		fail_msg("a stale temp file from a crashed run blocks the write: %s", err.message);
	expect_content(f->path, NEW, strlen(NEW));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_creates_with_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_keeps_existing_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_replaces_inode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refuses_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refuses_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refuses_missing_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refuses_readonly_unprivileged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_refuses_readonly_as_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_file_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path_inside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path_inside_refuses_escape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path_inside_missing_file_cannot_escape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_waiter_after_unlink_is_exclusive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_killed_holder_leaves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_refuses_hard_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_half_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_before_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_before_temp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_after_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_other_step_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_temp_does_not_block, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
