/*
 * A small strict JSON pull parser (RFC 8259 syntax) for the hot request
 * path. jansson builds a node per element: a 784-float tensor cost ~280 us
 * to parse; this cursor decodes numbers in place (~20x faster) and never
 * allocates. Used by the KServe request parser; fuzzed through it.
 *
 * A vr_kj reads a borrowed buffer; every function returns 0 / 1 as stated
 * or a negative VR_EFORMAT with "malformed JSON at byte N: ..." in err.
 * Nesting is limited to VR_KJ_MAX_DEPTH so hostile input cannot exhaust
 * the stack.
 */
#ifndef VR_SERVER_KJSON_H
#define VR_SERVER_KJSON_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_KJ_MAX_DEPTH 64

typedef struct vr_kj {
  const char *p, *end, *base;
  vr_errbuf *err;
  int depth;
} vr_kj;

void vr_kj_init(vr_kj *j, const char *text, size_t len, vr_errbuf *err);
/* Next non-space byte, or -1 at the end (consumes the spaces). */
int vr_kj_peek(vr_kj *j);
/* Syntax error at the cursor. */
int vr_kj_fail(vr_kj *j, const char *what);
/* 0 when only spaces remain. */
int vr_kj_finish(vr_kj *j);

/* Objects: begin consumes '{'; next returns 1 with the key read and ':'
 * consumed, 0 after the closing '}'. */
int vr_kj_obj_begin(vr_kj *j);
int vr_kj_obj_next(vr_kj *j, char *key, size_t cap, int *first);
/* Arrays: begin consumes '['; next returns 1 when an element follows, 0
 * after the closing ']'. */
int vr_kj_arr_begin(vr_kj *j);
int vr_kj_arr_next(vr_kj *j, int *first);

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80) within
 * [p, end), or 0: no overlong forms, no surrogates, nothing above
 * U+10FFFF. The rule of the JSON reader and of the writer (sbuf.c). */
size_t vr_kj_utf8_len(const char *p, const char *end);

/* A string value, unescaped into out (NUL-terminated); VR_ELIMIT if it
 * does not fit. */
int vr_kj_string(vr_kj *j, char *out, size_t cap);
/* A number: *d always; *i and *is_int = 1 when it is an integer literal
 * (no fraction or exponent) that fits int64. */
int vr_kj_number(vr_kj *j, double *d, int64_t *i, int *is_int);
/* true / false (1 / 0); VR_EFORMAT for anything else. */
int vr_kj_bool(vr_kj *j, int *out);
/* Skips any value. */
int vr_kj_skip(vr_kj *j);

#endif
