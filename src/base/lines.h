/*
 * Line-oriented text files (CSV profiles, traces, lists): one line at a
 * time into a caller's buffer, with the line end removed. A line that does
 * not fit is an error that names the file and line, never two half-lines
 * read as two rows.
 */
#ifndef VR_BASE_LINES_H
#define VR_BASE_LINES_H

#include <stddef.h>
#include <stdio.h>

#include "vario/status.h"

/* Reads the next line of f into buf[cap] (cap >= 2), without its "\n" or
 * "\r\n"; *ln counts the lines read and path names f in errors. Returns 1
 * (a line; *len its length, may be NULL), 0 at the end, or VR_EIO /
 * VR_EFORMAT (a line of cap - 1 bytes or more) with err set. */
int vr_read_line(FILE *f, char *buf, size_t cap, const char *path, long *ln, size_t *len,
                 vr_errbuf *err);

/* path opened for reading when it is a regular file; NULL otherwise (absent,
 * unreadable, or a directory, which fopen would open and fgets then fail
 * on). */
FILE *vr_open_regular(const char *path);

#endif
