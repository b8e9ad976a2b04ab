/*
 * outputcheck.h - can the service write the file an `output` setting names
 * (the routing recorder's file stem, RECORD)? verify runs as the
 * service's user (ExecStartPre, the container's entrypoint), so "this
 * process can create a file in the folder" is the question.
 */
#ifndef OEAP_OUTPUTCHECK_H
#define OEAP_OUTPUTCHECK_H

#include <stddef.h>

/* 0 when `path` is absolute, names a file (not a folder) and its folder exists and this process can create
 * files in it; else 1 with `why` (a sentence without the value) filled. */
int oeap_output_problem(const char *path, char *why, size_t cap);

#endif
