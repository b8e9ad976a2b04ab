/* trustcheck.c - the trust checks verify reports (trust.h states the rule). */
#include "trustcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "binding.h"
#include "library.h"
#include "trust.h"

int oeap_trust_report(oeap_report *rep, const oeap_patchdef *def, const char *name, const char *path,
                      const char *listed, uid_t owner, int escape, int quiet, int *failed, char *last, size_t lastcap)
{
	oeap_trust_problem p;
	int rc = oeap_trust_check_listed(path, owner, listed, &p);
	if (rc < 0)
		return 0;
	if (rc == 1 && last) {
		if (!strcmp(last, p.path))
			return 0; /* said already */
		snprintf(last, lastcap, "%s", p.path);
	}
	if (rc == 0)
		return quiet ? 0
		             : oeap_report_add(rep, name, 1, 0,
		                               "%s: it and every directory above it can be changed by root or the target's "
		                               "owner only",
		                               path);
	(*failed)++;
	const char *esc = oeap_trust_escape_name(def);
	if (escape)
		return oeap_report_warn(rep, name, 0, "%s; allowed by %s=true (a development tree): whoever can change it "
		                                      "can run code in the server",
		                        p.message, esc);
	return oeap_report_add(rep, name, 0, 0, "%s; whoever can change it can run code in the server%s%s%s", p.message,
	                       esc ? " (a development tree may set " : "", esc ? esc : "", esc ? "=true)" : "");
}

/* One "trust:WHAT" check; nothing when the path cannot be walked. */
static int report_path(oeap_report *rep, const oeap_patchdef *def, const char *what, const char *path,
                       const char *listed, uid_t owner, int escape, int *failed)
{
	char name[64];
	snprintf(name, sizeof(name), "trust:%s", what);
	return oeap_trust_report(rep, def, name, path, listed, owner, escape, 0, failed, NULL, 0);
}

int oeap_trust_verify(const oeap_patchdef *def, const char *target, const char *library,
                      const char *ld_library_path, const char *origin, int escape, oeap_report *rep)
{
	uid_t owner;
	int failed = 0, rc = 0;
	char *bind = NULL, *lib = NULL, *listed = NULL;
	struct stat st;
	if (oeap_trust_target_owner(target, &owner))
		return 0;
	/* The folders the import system lists to find the target and the
	 * binding (site-packages for its .pth files, each package folder down
	 * to the target's): adding an entry there is enough, so no sticky bit. */
	if (!(bind = oeap_binding_path(def, target)) || !(listed = oeap_trust_package_root(def, target))) {
		free(bind);
		return -1;
	}
	if ((rc = report_path(rep, def, "target", target, listed, owner, escape, &failed)))
		goto done;
	if (lstat(bind, &st) == 0 && (rc = report_path(rep, def, "binding", bind, listed, owner, escape, &failed)))
		goto done;
	/* A relative path names a file of the server's working directory, not
	 * of ours: judging the one here would be an "ok" about another file (the
	 * library check FAILs it already). */
	if (library && !oeap_library_relative(library) &&
	    (lib = oeap_trust_library_file(library, ld_library_path, origin)) &&
	    (rc = report_path(rep, def, "library", lib, NULL, owner, escape, &failed)))
		goto done;
	if (escape && !failed)
		rc = oeap_report_warn(rep, "trust", 0, "%s=true is set, and nothing here needs it: unset it",
		                      oeap_trust_escape_name(def));
done:
	free(listed);
	free(lib);
	free(bind);
	return rc;
}
