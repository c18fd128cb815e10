/*
 * Classification labels (Triton's output { label_filename }): a text file,
 * one label per line, line i naming class i. Read once when the model
 * loads; immutable after, reference-counted so a response can still use
 * them after the model is unloaded (the server retains them per request).
 *
 * Accepted: '\n' or "\r\n" line ends, a last line without one, empty lines
 * (an empty label: the class answers "score:index" as Triton does).
 * Rejected with a message naming the file: an empty file, a NUL byte, a
 * file over 64 MiB, and a label count that differs from the output's
 * class count (when that is known) — a wrong file gives wrong labels.
 */
#ifndef VR_RUNTIME_LABELS_H
#define VR_RUNTIME_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

typedef struct vr_labels vr_labels;

/* Parses text (not NUL-terminated; `what` names it in errors). classes
 * > 0: the count the labels must have. *out: one reference, released by
 * vr_labels_release. */
int vr_labels_parse(const char *text, size_t len, const char *what,
                    int64_t classes, vr_labels **out, vr_errbuf *err);
/* Reads and parses the file at path. */
int vr_labels_load(const char *path, int64_t classes, vr_labels **out,
                   vr_errbuf *err);

void vr_labels_retain(vr_labels *l);
void vr_labels_release(vr_labels *l); /* NULL is fine */

int64_t vr_labels_count(const vr_labels *l);
/* Label of class i; NULL when i is out of range or l is NULL. */
const char *vr_labels_get(const vr_labels *l, int64_t i);

#endif
